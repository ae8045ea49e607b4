"""Debezium value conversion in plain Python (`decode/debezium/`: `exact_json.py`,
`field_schemas.py`, `values.py`): exact numbers, Connect logical types, and the rule / type a
field schema picks."""

from __future__ import annotations

import base64

import pytest

from cdc_assets.decode.debezium.exact_json import JsonNumber, loads_exact, plain_number_text, text_of
from cdc_assets.decode.debezium.field_schemas import field_facts, value_kind_type
from cdc_assets.decode.debezium.values import canonical_values


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def test_numbers_keep_every_digit():
    v = loads_exact('{"d": 12345678901234567890.123456789, "big": 18446744073709551616, "f": 1.5}')
    assert type(v["d"]) is JsonNumber and text_of(v["d"]) == "12345678901234567890.123456789"
    assert text_of(v["big"]) == "18446744073709551616"
    with pytest.raises(ValueError):
        loads_exact('{"x": NaN}')


@pytest.mark.parametrize(("written", "text"), [
    ("1.50", "1.5"), ("1.0", "1"), ("-0.0", "0"), ("100.0", "100"), ("1e10", "1e10"), ("0.10", "0.1")])
def test_json_numbers_carry_no_scale(written, text):
    assert text_of(loads_exact(written)) == text


def test_other_json_values_as_text():
    assert [text_of(x) for x in (True, False, None, "s", 7)] == ["true", "false", None, "s", "7"]
    assert text_of(loads_exact('{"a": [1, 2.50, "x"]}')) == '{"a":[1,2.5,"x"]}'


@pytest.mark.parametrize(("text", "plain"), [
    ("1.0E38", "1" + "0" * 38), ("-9.5e-7", "-0.00000095"), ("1e-07", "0.0000001"),
    ("1.25E1", "12.5"), ("77634.77", "77634.77"), ("abc", "abc")])
def test_exponents_become_plain_digits(text, plain):
    assert plain_number_text(text) == plain


def _field(type_, name=None, **params):
    f = {"type": type_, "field": "c"}
    if name:
        f["name"] = name
    if params:
        f["parameters"] = {k.replace("_", "."): v for k, v in params.items()}
    return f


def _convert(field: dict, value):
    bad: list[str] = []
    out = canonical_values({"c": value}, {"c": field_facts(field)}, bad)
    return out["c"], bad


@pytest.mark.parametrize(("field", "value", "text"), [
    (_field("bytes", "org.apache.kafka.connect.data.Decimal", scale="2"),
     _b64((1234567).to_bytes(4, "big", signed=True)), "12345.67"),
    (_field("bytes", "org.apache.kafka.connect.data.Decimal", scale="3"),
     _b64((-5).to_bytes(1, "big", signed=True)), "-0.005"),
    (_field("bytes", "org.apache.kafka.connect.data.Decimal", scale="2"), JsonNumber("12.30"), "12.3"),
    (_field("struct", "io.debezium.data.VariableScaleDecimal"),
     {"scale": 1, "value": _b64((125).to_bytes(1, "big", signed=True))}, "12.5"),
    (_field("bytes", "io.debezium.data.Bits"), _b64(bytes([0x01, 0x02])), "513"),
    (_field("int32", "io.debezium.time.Date"), 19723, "2024-01-01"),
    (_field("int64", "io.debezium.time.Timestamp"), 1704067200123, "2024-01-01 00:00:00.123000"),
    (_field("int64", "io.debezium.time.MicroTimestamp"), 1704067200000001, "2024-01-01 00:00:00.000001"),
    (_field("int64", "io.debezium.time.NanoTimestamp"), -1, "1969-12-31 23:59:59.999999"),
    (_field("string", "io.debezium.time.ZonedTimestamp"), "2024-01-01T08:00:00.5+08:00", "2024-01-01 00:00:00.500000"),
    (_field("int64", "io.debezium.time.MicroTime"), -(838 * 3600 + 59 * 60 + 59) * 10**6, "-838:59:59"),
    (_field("bytes"), "AAE=", "AAE="),
    # time.precision.mode=connect: Kafka Connect's Date (days), Time (ms of the day), Timestamp (ms)
    (_field("int32", "org.apache.kafka.connect.data.Date"), 19723, "2024-01-01"),
    (_field("int32", "org.apache.kafka.connect.data.Time"), 3723004, "01:02:03.004000"),
    (_field("int64", "org.apache.kafka.connect.data.Timestamp"), 1704067200123, "2024-01-01 00:00:00.123000"),
    # time.precision.mode=isostring (Debezium 3): ISO-8601 text labelled UTC
    (_field("string", "io.debezium.time.IsoDate"), "2024-02-29Z", "2024-02-29"),
    (_field("string", "io.debezium.time.IsoTime"), "23:59:01Z", "23:59:01"),
    (_field("string", "io.debezium.time.IsoTime"), "01:02:03.0045Z", "01:02:03.004500"),
    (_field("string", "io.debezium.time.IsoTimestamp"), "2024-01-01T00:00:00.123Z", "2024-01-01 00:00:00.123000"),
    (_field("string", "io.debezium.time.IsoTimestamp"), "1000-01-01T00:00:00Z", "1000-01-01 00:00:00"),
    (_field("string", "io.debezium.time.IsoTimestamp"), "2024-01-01T00:00:00.123456789+00:00",
     "2024-01-01 00:00:00.123456"),
    ({"type": "int64", "field": "c", "tidb_type": "BIGINT UNSIGNED"}, -1, "18446744073709551615"),
    ({"type": "double", "field": "c", "tidb_type": "decimal(38,0)"}, JsonNumber("1.0E20"), "100000000000000000000"),
    (_field("boolean"), True, "1"),
])
def test_connect_types_convert_to_canonical_text(field, value, text):
    assert _convert(field, value) == (text, [])


@pytest.mark.parametrize(("field", "value"), [
    (_field("bytes", "org.apache.kafka.connect.data.Decimal", scale="2"), "not base64!"),
    (_field("bytes", "org.apache.kafka.connect.data.Decimal"), "AQ=="),  # no scale
    (_field("bytes", "io.debezium.data.Bits"), _b64(bytes(9))),
    (_field("int64", "io.debezium.time.Timestamp"), 10**18),
    (_field("string", "io.debezium.time.ZonedTimestamp"), "yesterday"),
    (_field("string", "io.debezium.time.IsoDate"), "2023-02-29Z"),
    (_field("string", "io.debezium.time.IsoTime"), "10:15:30+08:00"),  # Debezium writes UTC only
    (_field("string", "io.debezium.time.IsoTimestamp"), "2024-01-01T08:00:00+08:00"),  # it would move the wall clock
    (_field("string", "io.debezium.time.IsoTime"), "24:00:00Z"),
    (_field("string", "io.debezium.time.IsoTime"), "23:60:00Z"),
    (_field("string", "io.debezium.time.IsoTime"), "\u0661\u0660:15:30Z"),  # Arabic-Indic digits
    (_field("int32", "io.debezium.time.IsoDate"), 19723),
])
def test_values_that_do_not_convert_are_reported(field, value):
    assert _convert(field, value) == (None, ["c"])


def test_column_type_precedence():
    assert field_facts({"type": "string", "tidb_type": "VARBINARY"})[::2] == ("base64", "varbinary")
    source = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {
        "scale": "2", "connect.decimal.precision": "10", "__debezium.source.column.type": "DECIMAL",
        "__debezium.source.column.length": "12", "__debezium.source.column.scale": "2"}}
    assert field_facts(source) == ("decimal", 2, "decimal(12,2)")
    del source["parameters"]["__debezium.source.column.type"]
    assert field_facts(source)[2] == "decimal(10,2)"
    assert field_facts({"type": "int64", "name": "io.debezium.time.MicroTimestamp"})[2] == "datetime"
    assert field_facts({"type": "int16"})[::2] == ("text", "smallint")
    assert [field_facts({"type": t, "name": f"org.apache.kafka.connect.data.{n}"})[2]
            for t, n in (("int32", "Date"), ("int32", "Time"), ("int64", "Timestamp"))] == ["date", "time", "datetime"]
    assert [field_facts({"type": "string", "name": f"io.debezium.time.Iso{n}"})[::2]
            for n in ("Date", "Time", "Timestamp")] == [("iso_date", "date"), ("iso_time", "time"),
                                                        ("iso_timestamp", "datetime")]


def test_schemaless_values_are_typed_by_their_json_kind():
    kinds = [value_kind_type(loads_exact(t)) for t in ("true", "12", "1.5", "1e300", '"s"', "null", "[1]")]
    assert kinds == ["boolean", "decimal", "decimal", "double", "varchar", "varchar", "json"]


def _propagated(source_type: str) -> dict:
    return {"type": "string", "field": "c", "parameters": {"__debezium.source.column.type": source_type}}


@pytest.mark.parametrize(("mode", "written", "text"), [
    ("bytes", "AP8=", "AP8="),  # the default: a binary string is base64 (the connector's base64 mode)
    ("base64", "AP8=", "AP8="),
    ("base64-url-safe", "-_8", "+/8="),
    ("base64-url-safe", "AP8=", "AP8="),
    ("hex", "00ff", "AP8="),
    ("hex", "00FF", "AP8="),
    ("hex", "0g", None),
    ("base64-url-safe", "+/8=", None),  # not the URL-safe alphabet
    ("base64", "00ff", "00ff"),  # hex read as base64 is the bytes d3 47 df: what the option prevents
])
def test_binary_strings_follow_the_binary_handling_mode(mode, written, text):
    """`binary.handling.mode` base64 / base64-url-safe / hex writes binary columns as Connect
    strings; only a propagated source type says they are binary, and only the option says how."""
    rules = {"c": field_facts(_propagated("VARBINARY"), mode)}
    bad: list[str] = []
    assert canonical_values({"c": written}, rules, bad)["c"] == text
    assert bad == ([] if text else ["c"])
    assert rules["c"][2] == "varbinary"


def test_binary_handling_mode_leaves_other_columns_alone():
    assert field_facts(_propagated("VARCHAR"), "hex")[0] == "text"
    assert field_facts({"type": "bytes", "field": "c"}, "hex")[0] == "base64"  # Connect bytes: base64 in JSON
    # TiCDC writes its binary strings as base64 whatever the option
    assert field_facts({"type": "string", "field": "c", "tidb_type": "BLOB"}, "hex")[0] == "base64"

"""Open Protocol framing, quarantine reasons and value rules. Most checks call the pure
Python message decoder (no Spark); one Spark test proves lineage and raw bytes survive."""

from __future__ import annotations

import base64
import json
from datetime import timezone

import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode.common.arrow_events import zone
from cdc_assets.decode.open_protocol.events import decode_message
from cdc_assets.decode.open_protocol.frames import message_timestamps
from cdc_assets.decode.open_protocol.values import go_unquote
from cdc_assets.simulator.open_protocol import go_quote
from cdc_assets_tests.helpers import raw_frame

UTC = timezone.utc
VERSION = (1).to_bytes(8, "big")
ROW_KEY = {"ts": 100 << 18, "scm": "d", "tbl": "t", "t": 1}


def frame(*payloads: bytes) -> bytes:
    return b"".join(len(p).to_bytes(8, "big") + p for p in payloads)


def col(t: int, v, f: int = 0, h: bool = False) -> dict:
    return {"t": t, **({"h": True} if h else {}), "f": f, "v": v}


def row(id_: int = 1, **extra) -> dict:
    return {"u": {"id": col(3, id_, h=True), **extra}}


def enc(obj) -> bytes:
    return obj if isinstance(obj, bytes) else json.dumps(obj, ensure_ascii=False).encode()


def msg(*events) -> tuple[bytes, bytes]:
    return VERSION + frame(*(enc(k) for k, _ in events)), frame(*(enc(v) for _, v in events))


def outcome(key: bytes | None, value: bytes | None, tz=UTC) -> list[str | None]:
    return [e.get(REJECT_REASON) for e in decode_message(key, value, tz)]


GOOD = (ROW_KEY, row(1))


# -- framing: a broken frame quarantines the whole message, once ----------------------------
def whole(key: bytes | None, value: bytes | None) -> tuple[str, int]:
    """The one reject of a message with a framing error: (reason, event index, detail head)."""
    (ev,) = decode_message(key, value, UTC)
    assert "whole message" in ev["_reject_detail"] or ev[REJECT_REASON] == "missing_key"
    assert not {"database", "commit_ts", "after"} & ev.keys()  # nothing of it reads as an event
    return ev[REJECT_REASON], ev["event_index"]


def test_truncated_key_frame_quarantines_the_whole_message():
    """A key cut short (a producer killed mid-write): its first two events are not applied."""
    key, value = msg(GOOD, (ROW_KEY, row(2)), (ROW_KEY, row(3)))
    assert whole(key[:-5], value) == ("truncated_frame", 0)


def test_truncated_value_frame_quarantines_the_whole_message():
    key, value = msg(GOOD, (ROW_KEY, row(2)), (ROW_KEY, row(3)))
    assert whole(key, value[:-1]) == ("truncated_frame", 0)
    assert "after 2 value frame(s)" in decode_message(key, value[:-1], UTC)[0]["_reject_detail"]


def test_stray_bytes_after_the_last_key_frame():
    key, value = msg(GOOD)
    assert whole(key + b"\x00\x00", value) == ("truncated_frame", 0)


def test_negative_length_is_a_broken_frame():
    key, value = msg(GOOD)
    assert whole(key, b"\xff" * 8 + value) == ("truncated_frame", 0)


def test_bad_version_quarantines_the_message():
    key, value = msg(GOOD, GOOD)
    assert whole((2).to_bytes(8, "big") + key[8:], value) == ("bad_version", 0)
    # A key too short for its version: one reject, however many value frames follow.
    assert whole(b"\x00\x01", value) == ("truncated_frame", 0)


def test_missing_key():
    assert whole(None, frame(enc(row()))) == ("missing_key", 0)
    assert whole(b"", frame(enc(row()))) == ("missing_key", 0)


def test_two_keys_and_one_value_apply_nothing():
    """Issue 42.4: the first pair of a mispaired message used to be applied."""
    key, value = msg(GOOD, (ROW_KEY, row(2)))
    assert whole(key, frame(enc(row(1)))) == ("unpaired_key_value", 0)
    key1, _ = msg(GOOD)
    assert whole(key1, value) == ("unpaired_key_value", 0)
    # A version-only key with frames of values: values without keys.
    assert whole(VERSION, value) == ("unpaired_key_value", 0)


def test_row_keys_without_a_value_are_unpaired_beside_resolved_ones():
    """Only resolved events may come without a value: a row key among them breaks the message."""
    key1, _ = msg(GOOD)
    assert whole(key1, b"") == ("unpaired_key_value", 0)
    key, _ = msg(({"ts": 7, "t": 3}, None), GOOD, ({"ts": 9, "t": 3}, None))
    assert whole(key, None) == ("unpaired_key_value", 0)


def test_resolved_events_accept_an_empty_value_or_zero_length_frames():
    key, _ = msg(({"ts": 7, "t": 3}, None), ({"ts": 9, "t": 3}, None))
    for value in (b"", None, frame(b"", b"")):
        events = decode_message(key, value, UTC)
        assert [(e["event_kind"], e["watermark_ts"], e.get(REJECT_REASON)) for e in events] == [
            ("watermark", 7, None), ("watermark", 9, None)]


def test_version_only_key_has_no_events():
    assert decode_message(VERSION, b"", UTC) == []


# -- one bad event costs only that event -------------------------------------------------
def test_invalid_json_costs_one_event():
    key = VERSION + frame(enc(ROW_KEY), b"{not json", enc(ROW_KEY))
    value = frame(enc(row(1)), enc(row(2)), b"\xff\xfe")
    assert outcome(key, value) == [None, "invalid_json", "invalid_utf8"]


def test_unknown_column_type_costs_one_event():
    key, value = msg(GOOD, (ROW_KEY, row(2, x=col(99, 1))), (ROW_KEY, row(3)))
    events = decode_message(key, value, UTC)
    assert [e.get(REJECT_REASON) for e in events] == [None, "unknown_column_type", None]
    assert events[1]["database"] == "d" and events[1]["commit_ts"] == 100 << 18


@pytest.mark.parametrize(
    "key, value, reason",
    [
        ({"ts": 1, "scm": "d", "tbl": "t", "t": 9}, row(), "unknown_event_type"),
        ({"scm": "d", "tbl": "t", "t": 1}, row(), "missing_commit_ts"),
        ({"t": 3}, b"", "missing_watermark_ts"),
        ({"ts": 1, "t": 1}, row(), "missing_table_name"),
        (ROW_KEY, {"u": {"id": col(3, 1)}}, "missing_primary_key"),
        (ROW_KEY, {"u": {"id": col(3, None, h=True)}}, "null_primary_key"),
        (ROW_KEY, {"p": {"id": col(3, 1, h=True)}}, "missing_row_data"),
        (ROW_KEY, b"", "missing_row_data"),
        (ROW_KEY, {"u": {"id": col(3, 1, h=True)}, "d": {"id": col(3, 1, h=True)}}, "unexpected_shape"),
        (ROW_KEY, {"u": {"id": 5}}, "unexpected_shape"),
        (ROW_KEY, {"u": {"id": col(3, [1], h=True)}}, "unexpected_shape"),
        (ROW_KEY, [1, 2], "unexpected_shape"),
        (ROW_KEY, row(b=col(252, "not base64!", f=1)), "invalid_binary_value"),
        (ROW_KEY, row(b=col(15, "bad \\q escape", f=1)), "invalid_binary_value"),
        (ROW_KEY, row(b=col(15, 'bare " quote', f=1)), "invalid_binary_value"),
        (ROW_KEY, row(b=col(252, base64.b64encode(b"\xff").decode())), "invalid_text_value"),
        ({**ROW_KEY, "ohk": True}, row(), "handle_key_only"),
        ({**ROW_KEY, "ccl": "s3://bucket/x"}, b"", "claim_check_not_supported"),
        ({**ROW_KEY, "ccl": "s3://bucket/x"}, row(), "claim_check_not_supported"),
        ({"ts": 1, "scm": "d", "t": 2}, {"t": 1}, "missing_ddl_query"),
    ],
)
def test_event_reasons(key, value, reason):
    k, v = msg((key, value))
    events = decode_message(k, v, UTC)
    assert [e.get(REJECT_REASON) for e in events] == [reason]
    assert events[0]["_reject_detail"]


@pytest.mark.parametrize("large", [{"ohk": True}, {"ohk": False, "ccl": "s3://bucket/file-1.json"}])
def test_a_large_delete_sent_as_its_handle_key_is_usable(large):
    """TiCDC sends a too-large row as its handle key (claim-check too): enough for a DELETE."""
    k, v = msg(({**ROW_KEY, **large}, {"d": {"id": col(3, 4, h=True)}}))
    (ev,) = decode_message(k, v, UTC)
    assert (ev.get(REJECT_REASON), ev["op"], ev["pk_values"]) == (None, "DELETE", ["4"])


def test_a_vector_column_is_its_text():
    """TiDB's VECTOR (type code 225, ticdc `writeColumnFieldValue`) is written as its text."""
    (ev,) = decode_message(*msg((ROW_KEY, row(vec=col(225, "[1,2.5,3]", f=65)))), UTC)
    assert ev.get(REJECT_REASON) is None
    assert (ev["after"]["vec"], ev["column_types"]["vec"]) == ("[1,2.5,3]", "vector")


# -- values and types --------------------------------------------------------------------
def test_update_with_only_changed_old_columns_overlays_them_on_the_new_row():
    value = {"u": {"id": col(3, 1, f=0x0B, h=True), "a": col(15, "new"), "b": col(15, "same")},
             "p": {"a": col(15, "old")}}
    (ev,) = decode_message(*msg((ROW_KEY, value)), UTC)
    assert ev["op"] == "UPDATE"
    assert ev["before"] == {"id": "1", "a": "old", "b": "same"}
    assert ev["after"] == {"id": "1", "a": "new", "b": "same"}


def test_update_with_a_column_set_to_null_written_without_its_name_is_applied():
    """pingcap/ticdc (only-output-updated-columns) writes a column that became NULL into `p`
    as its bare fields: the UPDATE (complete in `u`) still applies; the old value is lost."""
    value = (b'{"u":{"id":{"t":3,"h":true,"f":11,"v":1},"c":{"t":15,"f":64,"v":null},"a":{"t":15,"f":0,"v":"new"}},'
             b'"p":{"t":15,"f":64,"v":"old","a":{"t":15,"f":0,"v":"was"}}}')
    (ev,) = decode_message(*msg((ROW_KEY, value)), UTC)
    assert ev.get(REJECT_REASON) is None
    assert ev["op"] == "UPDATE"
    assert ev["after"] == {"id": "1", "c": None, "a": "new"}
    assert ev["before"] == {"id": "1", "c": None, "a": "was"}


def test_a_bare_scalar_that_is_not_a_column_field_is_still_rejected():
    value = {"u": {"id": col(3, 1, h=True)}, "p": {"x": 5}}
    assert outcome(*msg((ROW_KEY, value))) == ["unexpected_shape"]


def test_primary_key_from_flag_bits_alone():
    value = {"u": {"a": col(3, 1, f=0x08), "b": col(3, 2, f=0x02), "c": col(3, 3, f=0x10)}}
    (ev,) = decode_message(*msg((ROW_KEY, value)), UTC)
    assert (ev["pk_names"], ev["pk_values"]) == (["a", "b"], ["1", "2"])


def test_unsigned_bigint_beyond_int64_is_exact():
    big = (1 << 64) - 1
    key, _ = msg(GOOD)
    value = frame(b'{"u":{"id":{"t":8,"h":true,"f":131,"v":%d},"x":{"t":4,"f":1,"v":1.0000001e+21}}}' % big)
    (ev,) = decode_message(key, value, UTC)
    assert ev["pk_values"] == [str(big)] and ev["column_types"]["id"] == "bigint unsigned"
    assert ev["after"]["x"] == "1.0000001e+21"  # a float keeps its JSON text
    assert ev["column_types"]["x"] == "float"  # binary charset flag on a number: not bytes


def test_binary_flag_on_numbers_and_dates_is_only_the_charset():
    value = row(n=col(3, -5, f=0x01), d=col(12, "2024-02-29 12:00:00", f=0x41), dec=col(246, "1.50", f=0x81))
    (ev,) = decode_message(*msg((ROW_KEY, value)), UTC)
    assert {c: ev["after"][c] for c in ("n", "d", "dec")} == {"n": "-5", "d": "2024-02-29 12:00:00", "dec": "1.50"}
    assert {c: ev["column_types"][c] for c in ("n", "d", "dec")} == {
        "n": "int", "d": "datetime", "dec": "decimal unsigned"}


def test_timestamp_wall_clock_is_converted_to_utc():
    value = row(ts=col(7, "2024-01-01 08:00:00.123"), dt=col(12, "2024-01-01 08:00:00"), z=col(7, "0000-00-00 00:00:00"))
    (ev,) = decode_message(*msg((ROW_KEY, value)), zone("Asia/Shanghai"))
    assert (ev["after"]["ts"], ev["after"]["dt"], ev["after"]["z"]) == (
        "2024-01-01 00:00:00.123", "2024-01-01 08:00:00", "0000-00-00 00:00:00")
    (ev,) = decode_message(*msg((ROW_KEY, value)), zone("-02:30"))
    assert ev["after"]["ts"] == "2024-01-01 10:30:00.123"


@pytest.mark.parametrize("data", [b"", b"\x00\xff", b"\x89PNG\r\n\x1a\n", "测试 \u2028\u00a0😀".encode(),
                                  b'"\\\x7f\xc3', bytes(range(256))])
def test_go_quote_round_trips_exact_bytes(data):
    assert go_unquote(go_quote(data)) == data


def test_go_unquote_reads_every_go_escape():
    assert go_unquote(r"\a\b\f\n\r\t\v\\\"\x00\377\u00e9\U0001F600") == (
        b"\x07\x08\x0c\n\r\t\x0b\\\"\x00\xff" + "é😀".encode())


def test_routing_timestamps_come_from_the_key():
    t = lambda ms: (1_767_225_600_000 + ms) << 18  # noqa: E731 (plausible times: 2026-01-01 + ms)
    key, _ = msg(({"ts": t(5), "t": 1}, None), ({"ts": t(9), "t": 3}, None), ({"ts": t(7), "t": 3}, None))
    assert message_timestamps(key) == (t(9), t(9), [1_767_225_600_005])
    # a time no changefeed can carry (9 ms after 1970) neither routes nor opens a window
    assert message_timestamps(msg(GOOD)[0]) == (None, None, [])
    assert message_timestamps(b"junk") == (None, None, [])


# -- Spark -------------------------------------------------------------------------------
def test_spark_decode_and_route_keep_lineage_and_raw_bytes(spark):
    from cdc_assets.decode import get_decoder

    good_key, good_value = msg(GOOD, ({"ts": 200 << 18, "t": 3}, None))
    trunc_key = msg(GOOD, (ROW_KEY, row(2)))[0][:-3]
    trunc_value = msg(GOOD, (ROW_KEY, row(2)))[1]
    keys = [good_key, (7).to_bytes(8, "big") + good_key[8:], trunc_key, None]
    values = [good_value, good_value, trunc_value, b"{}"]
    raw = raw_frame(spark, values, keys=keys)
    decoder = get_decoder("open-protocol")
    out = decoder.decode(raw).orderBy("kafka_offset", "event_index").collect()
    got = [(r["kafka_offset"], r["event_index"], r["event_kind"], r[REJECT_REASON]) for r in out]
    assert got == [(0, 0, "row", None), (0, 1, "watermark", None), (1, 0, "row", "bad_version"),
                   (2, 0, "row", "truncated_frame"), (3, 0, "row", "missing_key")]
    assert out[2]["key"] == keys[1] and out[2]["value"] == good_value and out[2]["topic"] == "t"
    assert out[3]["key"] == trunc_key and out[3]["value"] == trunc_value
    assert (out[0]["key"], out[0]["value"], out[1]["value"]) == (None, None, None)  # raw bytes go with rejects only
    assert out[0]["commit_time"] is not None and out[0]["source_position"] is None
    routed = {r["kafka_offset"]: (r["routing_ms"], r["watermark_ts"])
              for r in decoder.route(raw).collect()}
    kafka_ms = 1767225600000  # raw_frame's Kafka timestamp: the fallback for unreadable keys
    # 100 and 200 ms after 1970 are not plausible times: the Kafka timestamp routes them
    assert routed == {0: (kafka_ms, None), 1: (kafka_ms, None), 2: (kafka_ms, None), 3: (kafka_ms, None)}


def test_unknown_time_zone_fails_on_the_driver(spark):
    from cdc_assets.decode import get_decoder

    with pytest.raises(Exception):
        get_decoder("open-protocol", {"time-zone": "Mars/Olympus"}).decode(raw_frame(spark, [b""]))

"""The golden type-fidelity matrix as data: MySQL column type x edge value -> the exact
Python value Spark returns from the snapshot's typed column (`collect()`).

Each `Column` is one table (`id` + `v <type>`), each value one INSERT. `expected` is what
every protocol must give; `lossy` overrides it for the protocols that lose information
at the source (the producer never writes it), with the reason. docs/types.md is the
prose version of this file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import numpy as np

UTC = timezone.utc
ALL_BYTES = bytes(range(256))
EDGE_TEXT = ("", "Zoë", "测试", "😀🎉", "🧑\u200d💻 dev", "\x00nul", "tab\there", "line1\nline2\r\n",
             "\u2028sep\u2029", "<b>&amp;</b>", 'say "hi"', "back\\slash", "null", "e\u0301", "\x7fdel")
# Protocols whose TIMESTAMP is wall-clock text in the changefeed's (server's) zone: the
# repeated hour when DST ends has two instants for one text, and the reader picks the earlier.
WALL_CLOCK_TIMESTAMP = ("canal-json", "open-protocol", "canal-official", "cloudcanal-json")
# TiCDC writes ENUM / SET as their index / bit mask and names no members (mysqlType "enum").
ENUM_AS_INDEX = ("canal-json", "open-protocol")
# Debezium JSON is parsed into a Spark VARIANT, whose numbers have no negative zero.
VARIANT_JSON = ("debezium", "debezium-json")
_NEGATIVE_ZERO = "Spark's VARIANT reads the JSON number -0 / -0.0 as 0"


def f32(v: float) -> float:
    """The float32 nearest to v, as the Python float Spark returns for a FloatType value."""
    return float(np.float32(v))


@dataclass(frozen=True)
class Value:
    value: object  # as the simulated upstream holds it (see simulator.schema kinds)
    expected: object  # the Spark value every protocol must give
    lossy: dict[str, object] = field(default_factory=dict)  # protocol -> what it gives instead
    why: str = ""  # the reason for `lossy`


def same(*values) -> tuple[Value, ...]:
    """Values that come back unchanged."""
    return tuple(Value(v, v) for v in values)


@dataclass(frozen=True)
class Column:
    mysql_type: str  # as declared in the DDL
    values: tuple[Value, ...]


def _dt(fsp: int) -> datetime:
    return datetime(2023, 11, 30, 12, 34, 56, int("123456"[:fsp].ljust(6, "0")) if fsp else 0)


_D65 = "99999999999999999999999999999999999.999999999999999999999999999999"
_ENUM = "enum('a','b','c','it''s','😀')"
_SET = "set('a','b','c','d')"

MATRIX: tuple[Column, ...] = (
    # -- integers at their limits: one size up when unsigned, bigint unsigned as Decimal(20,0)
    Column("tinyint", same(-128, 127, 0)),
    Column("tinyint unsigned", same(0, 255)),
    Column("smallint", same(-32768, 32767)),
    Column("smallint unsigned", same(65535)),
    Column("mediumint", same(-8388608, 8388607)),
    Column("mediumint unsigned", same(16777215)),
    Column("int", same(-2147483648, 2147483647)),
    Column("int unsigned", same(4294967295)),
    Column("bigint", same(-9223372036854775808, 9223372036854775807)),
    Column("bigint unsigned", tuple(Value(v, Decimal(v)) for v in (0, 9223372036854775808, 18446744073709551615))),
    # -- decimals: declared (<= 38 digits: Decimal(p,s)), wider (exact text), without parameters
    Column("decimal(10,2)", (
        Value(Decimal("99999999.99"), Decimal("99999999.99")),
        Value(Decimal("-99999999.99"), Decimal("-99999999.99")),
        Value(Decimal("-0.00"), Decimal("0.00")),  # no negative zero in a DECIMAL
        Value(Decimal("0.01"), Decimal("0.01")),
    )),
    Column("decimal(38,0)", (
        Value(Decimal("9" * 38), Decimal("9" * 38), {"debezium": "100000000000000000000000000000000000000"},
              "TiCDC's Debezium DECIMAL is a float64: 1e38, and 39 digits no longer fit Decimal(38)"),
        Value(Decimal(1), Decimal(1), {"debezium": "1"}, "the column is text once a value has 39 digits"),
    )),
    Column("decimal(65,30)", (
        Value(Decimal(_D65), _D65, {"debezium": Decimal(10**35)}, "TiCDC's Debezium DECIMAL is a float64: 1e35"),
        Value(Decimal("-" + _D65), "-" + _D65, {"debezium": Decimal(-10**35)}, "TiCDC's Debezium DECIMAL is a float64"),
        Value(Decimal("0E-30"), "0.000000000000000000000000000000", {"debezium": Decimal(0)},
              "TiCDC's Debezium DECIMAL is a float64: no scale, so the column is Decimal(38,0)"),
    )),
    Column("decimal", (  # = decimal(10,0)
        Value(Decimal(9999999999), Decimal(9999999999)),
        Value(Decimal(-9999999999), Decimal(-9999999999)),
    )),
    # -- binary floating point: the float32 / float64 value, bit for bit
    Column("float", (*(Value(v, f32(v)) for v in (
        3.4028234663852886e38, -3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38, 0.1,
        16777217.0, 1.5,
    )), Value(-0.0, -0.0, dict.fromkeys(VARIANT_JSON, 0.0), _NEGATIVE_ZERO))),
    Column("double", (*same(
        1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 0.1,
        0.30000000000000004, 9007199254740993.0, -1.5,
    ), Value(-0.0, -0.0, dict.fromkeys(VARIANT_JSON, 0.0), _NEGATIVE_ZERO))),
    # -- character data: any UTF-8, including 4-byte characters and NUL
    Column("varchar(255)", same(*EDGE_TEXT)),
    Column("char(10)", same("", "Zoë😀", "\x00")),
    Column("tinytext", same("😀", "测试\x00")),
    Column("text", same(*EDGE_TEXT)),
    Column("mediumtext", same("Алёна 🙂")),
    Column("longtext", same("x" * 5000 + "😀")),
    # -- binary data: every byte 0..255 round-trips exactly
    Column("varbinary(256)", same(ALL_BYTES, b"", b"\x00", b"\xc3\xa9", b"\xff\xfe")),
    Column("binary(16)", same(b"abc" + b"\x00" * 13, bytes(range(240, 256)))),
    Column("tinyblob", same(ALL_BYTES[:255])),
    Column("blob", same(ALL_BYTES, b"")),
    Column("mediumblob", same(ALL_BYTES[::-1])),
    Column("longblob", same(ALL_BYTES * 4)),
    # -- dates; the zero date is NULL (docs/types.md)
    Column("date", (*same(date(1000, 1, 1), date(9999, 12, 31), date(1970, 1, 1), date(2024, 2, 29)),
                    Value("0000-00-00", None))),
    # -- DATETIME: wall clock, no zone, fractional seconds 0..6
    *(Column(f"datetime({fsp})" if fsp else "datetime", same(_dt(fsp))) for fsp in range(7)),
    Column("datetime(6)", (*same(datetime(1000, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)),
                           Value("0000-00-00 00:00:00.000000", None))),
    # -- TIMESTAMP: an instant (UTC). Written in a DST zone (America/New_York, see the test).
    Column("timestamp(6)", (
        *same(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
              datetime(2026, 3, 8, 7, 0, 0, tzinfo=UTC),  # 03:00 EDT, the first instant after the gap
              datetime(2026, 11, 1, 5, 30, 0, 123456, tzinfo=UTC)),  # 01:30 EDT (first of two)
        Value(datetime(2026, 11, 1, 6, 30, 0, 123456, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, 0, 123456, tzinfo=UTC),
              dict.fromkeys(WALL_CLOCK_TIMESTAMP, datetime(2026, 11, 1, 5, 30, 0, 123456, tzinfo=UTC)),
              "01:30 EST: the wall clock repeats; text in the zone cannot tell it from 01:30 EDT"),
    )),
    Column("timestamp", same(datetime(2026, 1, 1, tzinfo=UTC))),
    Column("timestamp(3)", same(datetime(2026, 7, 1, 12, 0, 0, 123000, tzinfo=UTC))),
    # -- TIME: a signed duration up to 838:59:59, as text [-]HH:MM:SS[.ffffff]
    Column("time", (
        Value(timedelta(hours=-838, minutes=-59, seconds=-59), "-838:59:59"),
        Value(timedelta(hours=838, minutes=59, seconds=59), "838:59:59"),
        Value(timedelta(0), "00:00:00"),
        Value(timedelta(seconds=-1), "-00:00:01", {"dts-avro": "00:00:01"},
              "DTS's DateTime has no sign of its own: a negative segment makes a TIME negative, "
              "and -00:00:01 with its sign on the hour (-0) has none"),
    )),
    Column("time(6)", (
        Value(timedelta(hours=12, minutes=34, seconds=56, microseconds=123456), "12:34:56.123456"),
        Value(-timedelta(hours=12, minutes=34, seconds=56, microseconds=123456), "-12:34:56.123456"),
        Value(timedelta(hours=100, microseconds=500000), "100:00:00.500000"),
    )),
    Column("time(3)", (Value(timedelta(seconds=1, microseconds=120000), "00:00:01.120000"),
                       Value(timedelta(hours=1), "01:00:00"))),
    # -- YEAR
    Column("year", same(1901, 2155, 0)),
    # -- ENUM / SET: member names; the empty SET is ""
    Column(_ENUM, tuple(
        Value(v, v, dict.fromkeys(ENUM_AS_INDEX, str(i)), "TiCDC writes the 1-based index and no member list")
        for v, i in (("a", 1), ("it's", 4), ("😀", 5))
    )),
    Column(_SET, tuple(
        Value(v, v, dict.fromkeys(ENUM_AS_INDEX, str(m)), "TiCDC writes the bit mask and no member list")
        for v, m in (("a,b", 3), ("", 0), ("a,b,c,d", 15), ("d", 8))
    )),
    # -- BIT(n): the unsigned number, Decimal(20,0)
    Column("bit(1)", tuple(Value(v, Decimal(v)) for v in (0, 1))),
    Column("bit(8)", tuple(Value(v, Decimal(v)) for v in (255, 16))),
    Column("bit(64)", tuple(Value(v, Decimal(v)) for v in ((1 << 64) - 1, 1 << 63, 0))),
    # -- JSON: the document's text, as the source printed it (a JSON null is the text "null")
    Column("json", same('{"emoji": "😀", "nested": {"zh": "测试", "list": [1, 2.5, null, true]}}',
                        "[]", '"str"', "null", '{"esc": "quote \\" backslash \\\\ nul \\u0000"}')),
)


def expected_for(value: Value, protocol: str):
    return value.lossy.get(protocol, value.expected)

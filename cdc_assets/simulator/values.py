"""Column values: how TiDB prints them, and seeded generators that hit the edge cases.

Workload values are typed Python objects (int, Decimal, str, bytes, datetime, None) so
every encoder can render them its own way; `tidb_text` is TiDB's own text form (what
Canal-JSON carries), `canonical_text` is what `truth.json` holds (binary as base64).
"""

from __future__ import annotations

import base64
import random
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

from cdc_assets.simulator import floats
from cdc_assets.simulator.schema import (
    BINARY, BIT, DATE, DATETIME, DECIMAL, ENUM, FLOAT, INT, JSON, SET, STRING, TIME, TIMESTAMP, UINT, YEAR,
    ColumnDef,
)

_INT_RANGES = {
    "tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64,
}

# Strings a pipeline tends to get wrong: non-ASCII, JSON/HTML specials, control
# characters, U+2028 (escaped by Go's JSON encoder), "null" look-alikes, empty string.
EDGE_STRINGS = (
    "", "Zoë", "测试", "😀🎉", "🧑‍💻 dev", "O'Brien", 'say "hi"', "back\\slash",
    "<b>&amp;</b>", "tab\there", "line1\nline2", "crlf\r\n", "null", "NULL", "e\u0301",
    "\u2028sep\u2029", "\x00nul", "\x7fdel", "\u200bzero-width", "Ñandú", "Ωmega ﬁ",
    "日本語テキスト", "Алёна", "محمد", "  leading spaces",
)
FIRST_NAMES = (
    "Ana", "Zoë", "Björn", "José", "李雷", "测试", "Öykü", "Saoirse", "Łukasz", "Nguyễn",
    "Алёна", "Chidi", "Ingrid", "Mateo", "Yuki", "Priya", "🙂 Sam", "Noël",
)
LAST_NAMES = ("Smith", "O'Brien", "Müller", "王", "García", "Kowalski", "Østergaard", "Tanaka", "Dubois")
WORDS = ("alpha", "beta", "gamma", "delta", "ß", "straße", "naïve", "café", "数据", "🚀", "&", "<", ">", "x")
STATUSES = ("NEW", "PAID", "SHIPPED", "CANCELLED", "REFUNDED", "déjà vu", "返品", "")
EDGE_DATETIMES = (
    datetime(1000, 1, 1, 0, 0, 0), datetime(9999, 12, 31, 23, 59, 59),
    datetime(1970, 1, 1, 0, 0, 0), datetime(2038, 1, 19, 3, 14, 8), datetime(2024, 2, 29, 12, 0, 0),
)
# Bytes that look like UTF-8 text: a consumer decoding them as UTF-8 instead of
# ISO-8859-1 gets different bytes back.
EDGE_BYTES = (b"", b"\x00", b"\xc3\xa9", "测试".encode(), b"<&>\"\\", b"\xff\xfe\xfd", b"\x80\x81\x9f")


def int_bounds(col: ColumnDef) -> tuple[int, int]:
    bits = _INT_RANGES[col.base_type]
    if col.kind == UINT:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def make_decimal(unscaled: int, scale: int) -> Decimal:
    """Exact decimal `unscaled * 10**-scale`, carrying exactly `scale` fraction digits."""
    return Decimal(unscaled).scaleb(-scale)


def _fraction(microsecond: int, fsp: int) -> str:
    return f".{microsecond:06d}"[: fsp + 1] if fsp else ""


def format_date(v: date) -> str:
    # Not strftime: "%Y" does not zero-pad years < 1000 on every platform.
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"


def format_datetime(v: datetime, fsp: int = 0) -> str:
    """MySQL's text of a DATETIME(fsp): exactly `fsp` fraction digits."""
    return f"{format_date(v)} {v.hour:02d}:{v.minute:02d}:{v.second:02d}{_fraction(v.microsecond, fsp)}"


def format_time(v: timedelta, fsp: int = 0) -> str:
    """MySQL's TIME text: may be negative and beyond 24 h ("-838:59:59")."""
    us = abs(v) // timedelta(microseconds=1)
    seconds, micro = divmod(us, 1_000_000)
    sign = "-" if v < timedelta(0) else ""
    return f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{_fraction(micro, fsp)}"


def zone(name: str):
    return timezone.utc if name.upper() == "UTC" else ZoneInfo(name)


def wall_clock(v: datetime, time_zone: str) -> datetime:
    """A TIMESTAMP (an aware instant) as the wall clock of `time_zone`, naive."""
    return v.astimezone(zone(time_zone)).replace(tzinfo=None)


def enum_index(col: ColumnDef, v: str) -> int:
    """ENUM value -> its 1-based index (0: the invalid value '')."""
    return col.members.index(v) + 1 if v else 0


def set_bits(col: ColumnDef, v: str) -> int:
    """SET value ("a,c") -> its bit mask (member i is bit i)."""
    return sum(1 << col.members.index(m) for m in v.split(",") if m)


def tidb_text(col: ColumnDef, v, *, time_zone: str = "UTC", java_floats: bool = False) -> str | None:
    """The value as TiDB prints it (binary: the raw bytes as ISO-8859-1 text).

    TiCDC Canal-JSON rules (tiflow `formatColumnValue`): ENUM / SET as index / bit mask,
    BIT as the unsigned number, FLOAT / DOUBLE as Go's 'f' format, TIMESTAMP in the
    changefeed's `time_zone`. `java_floats`: official Canal (Java) prints floats instead.
    """
    if v is None:
        return None
    kind = col.kind
    if kind in (INT, UINT, YEAR, BIT):
        return str(v)
    if kind == DECIMAL:
        return format(v, "f")
    if kind in (STRING, JSON):
        return v
    if isinstance(v, str) and kind in (DATE, DATETIME, TIMESTAMP):  # a zero date, as MySQL prints it
        return v
    if kind == DATETIME:
        return format_datetime(v, col.fsp)
    if kind == TIMESTAMP:
        return format_datetime(wall_clock(v, time_zone), col.fsp)
    if kind == DATE:
        return format_date(v)
    if kind == TIME:
        return format_time(v, col.fsp)
    if kind == FLOAT:
        bits = 32 if col.base_type == "float" else 64
        return floats.java(v, bits) if java_floats else floats.go_fixed(v, bits)
    if kind == ENUM:
        return str(enum_index(col, v))
    if kind == SET:
        return str(set_bits(col, v))
    return v.decode("latin-1")  # BINARY: byte b -> code point b


def canonical_text(col: ColumnDef, v) -> str | None:
    """The value as truth.json holds it: TiDB text, except binary = base64 of the bytes."""
    if v is not None and col.kind == BINARY:
        return base64.b64encode(v).decode("ascii")
    return tidb_text(col, v)


class ValueGenerator:
    """Seeded values for non-key columns, biased towards edge cases."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        # Per binary column: the next slice of bytes 0..255 still to emit, so every
        # byte value appears in the dump even in a short run.
        self._byte_cursor: dict[ColumnDef, int] = {}

    def value(self, col: ColumnDef, now: datetime):
        rng = self.rng
        if col.nullable and rng.random() < 0.2:
            return None
        kind = col.kind
        if kind in (INT, UINT):
            lo, hi = int_bounds(col)
            r = rng.random()
            if r < 0.08:
                return rng.choice((lo, hi, 0, 1, hi - 1) if kind == UINT else (lo, hi, 0, -1, 1))
            if r < 0.25:
                return rng.randint(lo, hi)
            return rng.randint(max(lo, -50), min(hi, 10_000))
        if kind == DECIMAL:
            top = 10 ** col.precision - 1
            r = rng.random()
            if r < 0.06:
                unscaled = rng.choice((0, top, -top, 1, -1))
            elif r < 0.2:
                unscaled = rng.randint(-top, top)
            else:
                unscaled = rng.randint(-(10 ** min(col.precision, 4)), 10 ** min(col.precision, 7))
            return make_decimal(unscaled, col.scale)
        if kind == STRING:
            return self._string(col)
        if kind == DATETIME:
            if rng.random() < 0.05:
                return rng.choice(EDGE_DATETIMES)
            return datetime(2000, 1, 1) + timedelta(seconds=rng.randrange(31 * 365 * 86400))
        if kind == BINARY:
            return self._bytes(col)
        raise AssertionError(kind)

    def _string(self, col: ColumnDef) -> str:
        rng = self.rng
        r = rng.random()
        if col.name == "status":
            s = rng.choice(STATUSES)
        elif r < 0.15:
            s = rng.choice(EDGE_STRINGS)
        elif col.name == "name":
            s = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        else:
            s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
        return s[: col.max_length] if col.max_length else s

    def _bytes(self, col: ColumnDef) -> bytes:
        rng = self.rng
        size = col.max_length or 64
        cursor = self._byte_cursor.get(col, 0)
        if cursor < 256:
            self._byte_cursor[col] = cursor + size
            return bytes(range(cursor, min(cursor + size, 256)))
        if rng.random() < 0.1:
            return rng.choice(EDGE_BYTES)[:size]
        return rng.randbytes(rng.randint(0, size))

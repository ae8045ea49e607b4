"""Debezium / Kafka Connect column values -> the change log's canonical text.

A value arrives as parsed JSON with its numbers kept as written (`exact_json`), plus, when
the message carries a schema, the rule its Connect field schema picks (`field_schemas`:
type, logical name, parameters, TiCDC's `tidb_type`).
Semantic types (debezium.io MySQL connector "data type mappings"):

- io.debezium.time.Date (days) -> `YYYY-MM-DD`; Timestamp / MicroTimestamp /
  NanoTimestamp (epoch ms / us / ns of the wall clock read as UTC) -> datetime text;
  ZonedTimestamp (ISO-8601 instant) -> UTC text; Time / MicroTime / NanoTime -> TIME
  text (may be negative or above 24 h). Fractions: 6 digits, left out when zero.
- `time.precision.mode=isostring` (Debezium 3): IsoDate `2023-11-21Z`, IsoTime
  `10:15:30.5Z`, IsoTimestamp `2023-11-21T18:29:26Z` (a DATETIME's wall clock labelled UTC)
  -> date / TIME / datetime text. Only UTC labels are read (Debezium writes `Z`): another
  offset would move a wall clock, so it does not convert.
- org.apache.kafka.connect.data.Decimal: base64 of the big-endian two's-complement
  unscaled value + `scale` parameter (or a plain JSON number: Flink CDC's numeric
  format); VariableScaleDecimal: {scale, value}. Exact up to 76 digits.
- io.debezium.data.Bits: base64 of little-endian bytes -> the unsigned integer.
- Connect `bytes`, and TiCDC strings whose `tidb_type` is binary/blob: base64 ->
  canonical base64 of the same bytes. JSON booleans -> `1` / `0`. A Connect `string` whose
  propagated source type is binary is in the connector's `binary.handling.mode` (the
  decoder option `binary-handling-mode`: bytes, the default, and base64 read base64;
  base64-url-safe; hex).
- TiCDC writes BIGINT UNSIGNED as a wrapped int64 (2^64-1 arrives as -1): with
  `tidb_type` (or a propagated source type) "bigint unsigned" a negative value gets 2^64
  added. Without either nothing says the column is unsigned: the wrapped value is kept.

A value that does not convert for its rule (bad base64, a time out of range, ...) becomes
None; the decoder quarantines its event as `invalid_value`.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import date, datetime, timedelta, timezone

from cdc_assets.decode.debezium.exact_json import (
    INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, plain_number_text, text_of, to_int, to_long,
)

_ZONED_RE = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d{2})?)?", re.A
)
_UTC_LABEL = r"(?:Z|[+-]00:?00)?"  # isostring values are labelled UTC (Debezium writes Z)
_ISO_DATE_RE = re.compile(rf"(\d{{4}}-\d{{2}}-\d{{2}}){_UTC_LABEL}", re.A)
_ISO_TIME_RE = re.compile(rf"([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.(\d{{1,9}}))?)?{_UTC_LABEL}", re.A)
_WHITESPACE = re.compile(r"\s+")
_US_PER_DAY = 86_400_000_000
# 0001-01-01 .. 9999-12-31 23:59:59.999999 in epoch microseconds; TIME within +-10^15 us.
_MIN_DATETIME_US, _MAX_DATETIME_US = -62_135_596_800_000_000, 253_402_300_799_999_999
_MAX_TIME_US = 10**15
_TWO_POW_64 = 1 << 64
_MAX_UNSCALED = 10**76  # beyond MySQL's 65 digits with room to spare
_EPOCH = date(1970, 1, 1)
_EPOCH_DT = datetime(1970, 1, 1, tzinfo=timezone.utc)


def canonical_values(raw: dict | None, rules: dict, bad: list) -> dict | None:
    """An image's values -> canonical text per the column rules (`field_schemas.field_facts`); the names
    of values that did not convert are appended to `bad`."""
    if raw is None:
        return None
    out = {}
    for k, v in raw.items():
        t = type(v)
        if t is str:
            r = rules.get(k)
            if r is None or r[0] == "text":
                out[k] = v  # the common case: plain text passes straight through
                continue
        elif v is None:
            out[k] = None
            continue
        elif t is bool:
            out[k] = "1" if v else "0"
            continue
        else:
            r = rules.get(k)
        text = _convert(r[0], r[1], v) if r is not None else text_of(v)
        if text is None:
            bad.append(k)
        out[k] = text
    return out


def _convert(rule: str, scale: int | None, v) -> str | None:
    text = text_of(v)
    if rule == "text":
        return text
    if rule == "decimal_number":
        return plain_number_text(text)
    if rule == "decimal":
        if type(v) is not str:  # Flink CDC's numeric format: a plain JSON number
            return plain_number_text(text)
        return _byte_decimal(_base64(text), scale)
    if rule == "variable_decimal":
        if type(v) is not dict:
            return None
        own_scale = to_int(v.get("scale"))
        return _byte_decimal(_base64(text_of(v.get("value"))), scale if own_scale is None else own_scale)
    if rule in ("base64", "base64url", "hex"):
        b = _base64(text) if rule == "base64" else _base64url(text) if rule == "base64url" else _hex(text)
        return None if b is None else base64.b64encode(b).decode("ascii")
    if rule == "bits":
        b = _base64(text)
        if b is None or len(b) > 8:
            return None
        return str(int.from_bytes(b, "little"))
    if rule == "iso_date":
        m = _ISO_DATE_RE.fullmatch(text.strip()) if type(v) is str else None
        return _valid_date(m.group(1)) if m else None
    if rule == "iso_time":
        m = _ISO_TIME_RE.fullmatch(text.strip()) if type(v) is str else None
        if m is None:
            return None
        h, mi, sec, frac = m.groups()
        return micros_to_time_text(((int(h) * 60 + int(mi)) * 60 + int(sec or 0)) * 1_000_000 + _micros_of(frac))
    if rule == "iso_timestamp":  # a DATETIME's wall clock: another offset than UTC would move it
        return micros_to_datetime_text(_zoned_micros(text, utc_only=True))
    number = to_long(v if type(v) is int else text)  # the time and unsigned rules read integer text
    if rule == "unsigned_bigint":
        return str(number + _TWO_POW_64) if number is not None and number < 0 else text
    if rule == "date":
        return _date_text(number)
    if rule == "zoned":
        return micros_to_datetime_text(_zoned_micros(text))
    if number is None:
        return None
    unit = rule.rsplit("_", 1)[1]
    micros = number * 1000 if unit == "ms" else number if unit == "us" else number // 1000
    if unit == "ms" and not INT64_MIN <= micros <= INT64_MAX:
        return None
    return micros_to_time_text(micros) if rule.startswith("time") else micros_to_datetime_text(micros)


def _base64(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(_WHITESPACE.sub("", text), validate=True)
    except (binascii.Error, ValueError):
        return None


_URL_SAFE = str.maketrans("-_+/", "+/!!")  # "+" and "/" are not in the URL-safe alphabet: made invalid


def _base64url(text: str | None) -> bytes | None:
    """URL-safe base64, padded or not, validated like `_base64`."""
    if text is None:
        return None
    body = _WHITESPACE.sub("", text).rstrip("=")
    return _base64(body.translate(_URL_SAFE) + "=" * (-len(body) % 4))


def _hex(text: str | None) -> bytes | None:
    try:
        return bytes.fromhex(text) if text is not None and text.isascii() else None
    except ValueError:
        return None


def _byte_decimal(b: bytes | None, scale: int | None) -> str | None:
    """Big-endian two's-complement unscaled bytes + scale -> exact decimal text."""
    if b is None or scale is None or scale < 0:
        return None
    unscaled = int.from_bytes(b, "big", signed=True)
    if abs(unscaled) >= _MAX_UNSCALED:
        return None
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    body = f"{digits[:-scale]}.{digits[-scale:]}" if scale > 0 else digits
    return "-" + body if unscaled < 0 else body


def _valid_date(text: str) -> str | None:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        return None


def _date_text(days: int | None) -> str | None:
    if days is None or not INT32_MIN <= days <= INT32_MAX:
        return None
    try:
        return (_EPOCH + timedelta(days=days)).isoformat()
    except OverflowError:
        return None


def _clock_text(us: int) -> str:
    """Non-negative microseconds -> `HH:MM:SS[.ffffff]` (hours may exceed 23)."""
    seconds, frac = divmod(us, 1_000_000)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return f"{h:02d}:{m:02d}:{s:02d}" + (f".{frac:06d}" if frac else "")


def micros_to_datetime_text(us: int | None) -> str | None:
    """Epoch microseconds -> `YYYY-MM-DD HH:MM:SS[.ffffff]`, without any time zone."""
    if us is None or not _MIN_DATETIME_US <= us <= _MAX_DATETIME_US:
        return None
    days, rest = divmod(us, _US_PER_DAY)
    return f"{(_EPOCH + timedelta(days=days)).isoformat()} {_clock_text(rest)}"


def micros_to_time_text(us: int | None) -> str | None:
    if us is None or not -_MAX_TIME_US <= us <= _MAX_TIME_US:
        return None
    return ("-" if us < 0 else "") + _clock_text(abs(us))


def _zoned_micros(text: str | None, utc_only: bool = False) -> int | None:
    """ISO-8601 instant text (`2018-01-13T09:52:33.123Z`, `+08:00` offsets; no zone = UTC,
    the session's zone) -> epoch microseconds. `utc_only`: None for any other offset."""
    m = _ZONED_RE.fullmatch(text.strip()) if text is not None else None
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    offset = 0
    if zone and zone not in ("Z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        body = zone[1:].replace(":", "")
        hours, minutes = (body, "0") if len(body) <= 2 else (body[:-2], body[-2:])
        offset = sign * (int(hours) * 60 + int(minutes))
    try:
        wall = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), tzinfo=timezone.utc)
    except ValueError:
        return None
    if utc_only and offset:
        return None
    micros = (wall - _EPOCH_DT) // timedelta(microseconds=1) + _micros_of(frac)
    return micros - offset * 60_000_000


def _micros_of(fraction: str | None) -> int:
    """Fraction-of-second digits (up to 9) -> whole microseconds (MySQL keeps 6)."""
    return int((fraction or "").ljust(6, "0")[:6])

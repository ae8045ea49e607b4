"""JSON as Debezium / Kafka Connect messages write it, read without losing a digit.

A number with a fraction or exponent is kept as written (`JsonNumber`): a double would
re-print 9999999999.99 and drop DECIMAL digits beyond 17; integers are Python ints, so
numbers stay apart from strings. `text_of`, `to_long` and `to_int` read such values as a
lenient cast would; `plain_number_text` rewrites an exponent form as plain digits.
"""

from __future__ import annotations

import json
import re

from cdc_assets.decode.common.arrow_events import as_text

_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
_EXPONENT_RE = re.compile(r"(-?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)")
_LEADING_ZEROS = re.compile(r"^0+(?=\d)")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_MAX_EXPONENT = 1000  # a plain-digit rewrite longer than this keeps the exponent form


class JsonNumber(str):
    """A JSON number with a fraction or exponent, kept as written (`json.loads(parse_float=)`):
    a double would re-print 9999999999.99 and drop DECIMAL digits beyond 17."""

    __slots__ = ()


def _number_text(n: JsonNumber) -> str:
    """A number's digits without trailing fraction zeros (`1.50` -> `1.5`, `1.0` -> `1`):
    JSON numbers carry no scale, so a schema-less `1.0` and a typed `1` are the same value."""
    text = str.__str__(n)
    if "." in text and "e" not in text and "E" not in text:
        text = text.rstrip("0").rstrip(".")
        if text == "-0":
            text = "0"
    return text


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


#: Parses JSON keeping every number's digits (integers as Python ints, others as
#: `JsonNumber`); NaN / Infinity are not JSON and fail like any other malformed text.
EXACT_JSON = json.JSONDecoder(parse_float=JsonNumber, parse_constant=_reject_constant)


def loads_exact(text: str):
    return EXACT_JSON.decode(text)


def _json_text(v) -> str:
    """Compact JSON of a parsed value, numbers exactly as they came."""
    if type(v) is dict:
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _json_text(x) for k, x in v.items()) + "}"
    if type(v) is list:
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if type(v) is JsonNumber:
        return _number_text(v)
    return json.dumps(v, ensure_ascii=False)


def text_of(v) -> str | None:
    """A JSON value read as text: strings as they are, numbers with their digits, booleans
    `true` / `false`, objects and arrays as compact JSON (numbers inside kept as written)."""
    t = type(v)
    if v is None or t is str:
        return v
    if t is JsonNumber:
        return _number_text(v)
    if t is dict or t is list:
        return _json_text(v)
    return as_text(v)


def to_long(v) -> int | None:
    """A JSON value as a 64-bit integer, as a lenient cast reads it: integers, integral text,
    numbers with a fraction truncated; None when it does not fit or is not a number."""
    t = type(v)
    if t is int:
        return v if INT64_MIN <= v <= INT64_MAX else None
    if t is str:
        s = v.strip()
        n = int(s) if _INTEGER_RE.fullmatch(s) else None
    elif t is JsonNumber:
        try:
            n = int(float(v)) if "e" in v or "E" in v else int(v.split(".")[0] or "0")
        except (ValueError, OverflowError):
            return None
    elif t is bool:
        return int(v)
    else:
        return None
    return n if n is not None and INT64_MIN <= n <= INT64_MAX else None


def to_int(v) -> int | None:
    n = to_long(v)
    return n if n is not None and INT32_MIN <= n <= INT32_MAX else None


def plain_number_text(text: str | None) -> str | None:
    """A JSON number in exponent form ("1.0E38", "-9.5e-7") -> plain decimal text; other
    text unchanged. For DECIMAL columns written as doubles (TiCDC's Debezium), so the
    snapshot sees the digits and not an exponent it cannot read as a decimal."""
    m = _EXPONENT_RE.fullmatch(text) if text is not None and ("e" in text or "E" in text) else None
    if m is None:
        return text
    sign, whole, fraction, exponent = m.groups()
    digits = whole + (fraction or "")
    point = len(whole) + int(exponent)
    if abs(point) > _MAX_EXPONENT:
        return text
    if point <= 0:
        body = "0." + "0" * -point + digits
    elif point >= len(digits):
        body = digits + "0" * (point - len(digits))
    else:
        body = digits[:point] + "." + digits[point:]
    return sign + _LEADING_ZEROS.sub("", body)

"""Open Protocol's event JSON and column values -> canonical change-log text.

A column is `{"t": type code, "h": handle?, "f": flag bits, "v": value}`. Type codes
249-252 (the blob family) are base64 of the bytes (text blobs: UTF-8 text); char/varchar
with the binary flag are Go-quoted (strconv.Quote without the quotes); unsigned bigint is a
bare JSON number (Python's json keeps it exact). Numbers keep their JSON text (floats are
not re-rounded).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from datetime import tzinfo

from cdc_assets.decode.common.arrow_events import Reject, timestamp_to_utc


BINARY_FLAG, HANDLE_KEY_FLAG, PRIMARY_KEY_FLAG, UNSIGNED_FLAG = 0x01, 0x02, 0x08, 0x80
_KEY_FLAGS = HANDLE_KEY_FLAG | PRIMARY_KEY_FLAG
# Type code -> (MySQL type, MySQL type with the binary flag). Docs "Column type code".
COLUMN_TYPES = {
    1: ("tinyint", "tinyint"), 2: ("smallint", "smallint"), 3: ("int", "int"),
    4: ("float", "float"), 5: ("double", "double"), 6: ("null", "null"),
    7: ("timestamp", "timestamp"), 8: ("bigint", "bigint"), 9: ("mediumint", "mediumint"),
    10: ("date", "date"), 11: ("time", "time"), 12: ("datetime", "datetime"), 13: ("year", "year"),
    14: ("date", "date"), 15: ("varchar", "varbinary"), 16: ("bit", "bit"),
    225: ("vector", "vector"),  # TiDB's VECTOR (TypeTiDBVectorFloat32), its text `[1,2,3]`
    245: ("json", "json"), 246: ("decimal", "decimal"), 247: ("enum", "enum"), 248: ("set", "set"),
    249: ("tinytext", "tinyblob"), 250: ("mediumtext", "mediumblob"),
    251: ("longtext", "longblob"), 252: ("text", "blob"),
    253: ("varchar", "varbinary"), 254: ("char", "binary"), 255: ("geometry", "geometry"),
}
_SIGNED_CODES = {1, 2, 3, 4, 5, 8, 9, 246}  # "unsigned" is meaningful for these only
_BLOB_CODES = {249, 250, 251, 252}  # value = base64 of the bytes, text or binary
_CHAR_CODES = {15, 253, 254}  # value = UTF-8 text; Go-quoted bytes with the binary flag
_TIMESTAMP_CODE = 7


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


class _NegativeZero(int):
    """Go writes a float -0.0 as `-0`: an int to json, but the FLOAT column's value is -0.0."""

    def __str__(self) -> str:
        return "-0"


def _parse_int(text: str) -> int:
    return _NegativeZero(0) if text == "-0" else int(text)


# `json.loads` with options builds a decoder per call; these are built once. Text without
# `-0` takes the one that parses ints natively (no Python call per number).
_JSON = json.JSONDecoder(parse_float=str, parse_constant=_no_constants)
_JSON_NEGATIVE_ZERO = json.JSONDecoder(parse_float=str, parse_int=_parse_int, parse_constant=_no_constants)


def _loads(text: str):
    """`json.loads(text, parse_float=str, parse_int=_parse_int, parse_constant=_no_constants)`."""
    if text.startswith("\ufeff"):  # as json.loads refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return (_JSON_NEGATIVE_ZERO if "-0" in text else _JSON).decode(text)


def parse_json(raw: bytes, what: str) -> dict:
    """Floats keep their text (parse_float=str); ints stay exact Python ints (`-0` too)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Reject("invalid_utf8", f"the {what} JSON is not valid UTF-8") from None
    try:
        obj = _loads(text)
    except ValueError as e:
        raise Reject("invalid_json", f"the {what} is not valid JSON: {e}") from None
    except RecursionError:
        raise Reject("invalid_json", f"the {what} JSON nests too deeply") from None
    if not isinstance(obj, dict):
        raise Reject("unexpected_shape", f"the {what} JSON is not an object")
    return obj


_GO_ESCAPE_RE = re.compile(rb'\\(x[0-9a-fA-F]{2}|[0-7]{3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[abfnrtv\\"]|.?)', re.S)
_GO_SIMPLE = {b"a": b"\x07", b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t",
              b"v": b"\x0b", b"\\": b"\\", b'"': b'"'}


def _go_escape(m: re.Match) -> bytes:
    e = m.group(1)
    if e in _GO_SIMPLE:
        return _GO_SIMPLE[e]
    head, size = e[:1], len(e)
    if head == b"x" and size == 3:
        return bytes([int(e[1:], 16)])
    if (head, size) in ((b"u", 5), (b"U", 9)):
        cp = int(e[1:], 16)
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            raise ValueError(f"invalid code point \\{e.decode()}")
        return chr(cp).encode("utf-8")
    if size == 3 and e.isdigit() and int(e, 8) <= 0xFF:
        return bytes([int(e, 8)])
    raise ValueError(f"invalid escape \\{e.decode('utf-8', 'replace')}")


def go_unquote(text: str) -> bytes:
    """Inverse of Go's strconv.Quote without the surrounding quotes: the exact bytes."""
    raw = text.encode("utf-8")
    if b'"' in raw.replace(b'\\\\', b"").replace(b'\\"', b"") or b"\n" in raw:
        raise ValueError("unescaped quote or newline")
    return _GO_ESCAPE_RE.sub(_go_escape, raw)


def _scalar_text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, str)):
        return str(v)
    raise TypeError


def column_value(name: str, code: int, binary: bool, v, tz: tzinfo) -> str | None:
    """One column value -> canonical change-log text."""
    if v is None:
        return None
    if code in _BLOB_CODES or (binary and code in _CHAR_CODES):
        if not isinstance(v, str):
            raise Reject("unexpected_shape", f"column {name}: binary value is not a JSON string")
        try:
            data = (base64.b64decode(v, validate=True) if code in _BLOB_CODES else go_unquote(v))
        except (binascii.Error, ValueError) as e:
            raise Reject("invalid_binary_value", f"column {name} (type {code}): {e}") from None
        if binary:
            return base64.b64encode(data).decode("ascii")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject("invalid_text_value", f"column {name} (type {code}): text is not UTF-8") from None
    try:
        text = _scalar_text(v)
    except TypeError:
        raise Reject("unexpected_shape", f"column {name}: value is a JSON {type(v).__name__}") from None
    return timestamp_to_utc(text, tz) if code == _TIMESTAMP_CODE else text


@functools.lru_cache(maxsize=4096)
def column_type(code: int, flag: int) -> str:
    plain, with_binary = COLUMN_TYPES[code]
    name = with_binary if flag & BINARY_FLAG else plain
    return f"{name} unsigned" if flag & UNSIGNED_FLAG and code in _SIGNED_CODES else name


def decode_image(image, tz: tzinfo) -> tuple[dict, dict, list[str]]:
    """{name: column} -> (values, MySQL types, primary-key names in column order)."""
    if not isinstance(image, dict):
        raise Reject("unexpected_shape", "a row image is not a JSON object")
    values, types, keys = {}, {}, []
    for name, col in image.items():
        if not isinstance(col, dict):
            raise Reject("unexpected_shape", f"column {name} is not a JSON object")
        code, flag = col.get("t"), col.get("f", 0)
        if flag is None:
            flag = 0
        if type(flag) is not int:
            raise Reject("unexpected_shape", f"column {name}: flag {flag!r} is not an integer")
        if type(code) is not int or code not in COLUMN_TYPES:
            raise Reject("unknown_column_type", f"column {name}: type code {code!r}")
        values[name] = column_value(name, code, bool(flag & BINARY_FLAG), col.get("v"), tz)
        types[name] = column_type(code, flag)
        if col.get("h") is True or flag & _KEY_FLAGS:
            keys.append(name)
    return values, types, keys

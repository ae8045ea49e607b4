"""JSON text byte-compatible with Go's encoders (encoding/json, easyjson) used by TiCDC.

Python's `json` differs from Go in a few escapes that consumers must tolerate:
Go escapes `<`, `>`, `&` (HTML safety) and U+2028/U+2029 as \\u003c, \\u003e, \\u0026,
\\u2028, \\u2029, writes \\b and \\f as \\u0008 and \\u000c, and leaves other non-ASCII
as raw UTF-8. Hex digits are lower case in both.
"""

from __future__ import annotations

import json
import re

_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
# Matching `\\` first keeps an escaped backslash followed by "b"/"f" intact.
_FIXUP_RE = re.compile(r"\\[\\bf]|[<>&\u2028\u2029]")
_FIXUPS = {
    "\\\\": "\\\\",
    "\\b": "\\u0008",
    "\\f": "\\u000c",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


# A number written verbatim: Go (and Java) print floats in their own notation, Python's
# `repr` would differ ("3.4028234663852886e+38" for a float32). See `raw_number`.
_RAW = "\ue000"
_RAW_RE = re.compile(f'"{_RAW}([^"{_RAW}]*){_RAW}"')


def raw_number(text: str) -> str:
    """Mark a JSON number's exact text; `go_json_dumps` writes it unquoted."""
    return f"{_RAW}{text}{_RAW}"


def _fix(m: re.Match) -> str:
    return _FIXUPS[m.group(0)]


def go_json_dumps(obj) -> str:
    """Compact JSON (insertion-ordered keys) as Go's encoder would write it."""
    out = _FIXUP_RE.sub(_fix, _DUMPS(obj))
    return _RAW_RE.sub(r"\1", out) if _RAW in out else out

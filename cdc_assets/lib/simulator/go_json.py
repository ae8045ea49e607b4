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


def _fix(m: re.Match) -> str:
    return _FIXUPS[m.group(0)]


def go_json_dumps(obj) -> str:
    """Compact JSON (insertion-ordered keys) as Go's encoder would write it."""
    return _FIXUP_RE.sub(_fix, _DUMPS(obj))

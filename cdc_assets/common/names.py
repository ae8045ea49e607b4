"""Safe storage names of tables, and atomic writes of local files.

The warehouse itself is Iceberg tables only (common/iceberg_tables.py): nothing here touches it.
What remains is local: the S3 input mirror's index and `cdc-assets export`'s files, each
written to a hidden temporary sibling and `os.replace`d, so a reader never sees half of one.

Names that come from messages (databases, tables) become storage names in one place,
`table_id`: each part percent-encoded, so it can never leave the warehouse root, and
bounded, so it fits a file name. A part whose encoding is at most `MAX_PART_BYTES` is kept
as it is (every warehouse written before keeps its folders); a longer one (a 40-character
Chinese name encodes to 360 bytes) becomes a readable prefix of its encoding, `~` and the
SHA-256 of the real name. `~` is never in an encoding, so the two forms cannot meet, and the
digest keeps long names apart. The real (database, table) is in each manifest entry (and
in an exported file's Parquet metadata), never parsed back from a storage name.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


# Longest storage name of a database or a table. A table's name is both parts and a dot
# (221 bytes), and its longest file name is the export's temporary `.tmp-{db.table}.parquet-`
# and 8 hex digits: 243 bytes, under the usual 255-byte limit of one file name.
MAX_PART_BYTES = 110
_DIGEST_MARK = "~"  # not in any percent-encoding: a long name's storage name is never a short one's
_DIGEST_CHARS = 64  # SHA-256, hex


def safe_name(name: str) -> str:
    """Percent-encode everything but [A-Za-z0-9_-]: reversible, no '/', no '..'."""
    return "".join(ch if ch in _SAFE else _encoded(ch) for ch in name)


def _encoded(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def storage_part(name: str) -> str:
    """One name's storage form: `safe_name` when it fits `MAX_PART_BYTES`, else the encoding
    of the name's first characters that fit, `~` and the SHA-256 of the whole name."""
    encoded = safe_name(name)
    if len(encoded) <= MAX_PART_BYTES:
        return encoded
    room, prefix = MAX_PART_BYTES - len(_DIGEST_MARK) - _DIGEST_CHARS, []
    for ch in name:  # whole characters only: the prefix decodes to the name's beginning
        part = ch if ch in _SAFE else _encoded(ch)
        if len(part) > room:
            break
        prefix.append(part)
        room -= len(part)
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{''.join(prefix)}{_DIGEST_MARK}{digest}"


def table_id(database: str, table: str) -> str:
    """A table's storage name (folders, manifest keys, export files): `db.table` with each
    part made safe and bounded (`storage_part`), so the dot is only ever our separator."""
    return f"{storage_part(database)}.{storage_part(table)}"


_SUFFIX_DIGITS = 8  # hex digits of the random suffix of a temporary sibling's name


def temp_sibling(final: Path) -> Path:
    """A hidden, unique sibling of `final` to write before the rename: `.tmp-{name}-{hex}`."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".tmp-{final.name}-{uuid.uuid4().hex[:_SUFFIX_DIGITS]}")


def write_json_atomic(path: Path, payload: Any) -> None:
    tmp = temp_sibling(path)
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    if not path.exists():
        return default
    return json.loads(path.read_text())

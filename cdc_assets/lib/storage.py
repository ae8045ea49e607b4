"""Warehouse paths, safe names and atomic writes (local filesystem).

Every directory a reader can see is complete: data is written to a hidden temporary
sibling and renamed into place; JSON manifests are written to a temporary file and
`os.replace`d.

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

import fcntl
import glob
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

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


def window_dir(root: Path, window_start_ms: int) -> Path:
    return root / f"window_start_ms={window_start_ms}"


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished temporary directory into place, replacing any previous version."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        trash = _sibling(".trash", final)
        os.replace(final, trash)
        os.replace(tmp, final)
        # Renamed to garbage before the slow delete: a kill mid-delete must leave nothing
        # that `remove_stale_temps` would put back.
        garbage = temp_sibling(final)
        os.replace(trash, garbage)
        shutil.rmtree(garbage, ignore_errors=True)
    else:
        os.replace(tmp, final)


@contextmanager
def exclusive(final: Path) -> Iterator[None]:
    """One writer at a time for `final` (two runs of the same window, a retry racing a
    stale run): an OS file lock next to it, released even when the process dies."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with (final.parent / f".lock-{final.name}").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def remove_path(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


_SUFFIX_DIGITS = 8  # hex digits of the random suffix of a sibling's name


def _sibling(prefix: str, final: Path) -> Path:
    """A hidden, unique sibling of `final`: `{prefix}-{name}-{hex suffix}`."""
    return final.with_name(f"{prefix}-{final.name}-{uuid.uuid4().hex[:_SUFFIX_DIGITS]}")


def _sibling_pattern(prefix: str, final: Path) -> str:
    """The glob of `_sibling(prefix, final)`: no other name's siblings (`a` must not match `a-b`)."""
    return f"{prefix}-{glob.escape(final.name)}-{'[0-9a-f]' * _SUFFIX_DIGITS}"


def remove_stale_temps(final: Path) -> None:
    """Clean up after a killed writer (call while holding `exclusive`): its temporary
    siblings of `final` go, and so do old versions moved aside by `replace_dir`. A kill
    between `replace_dir`'s two renames leaves no `final`: the version moved aside, the
    last complete one, is put back first."""
    for stale in final.parent.glob(_sibling_pattern(".tmp", final)):
        remove_path(stale)
    moved_aside = sorted(final.parent.glob(_sibling_pattern(".trash", final)), key=lambda p: p.lstat().st_ctime)
    if moved_aside and not final.exists():
        os.replace(moved_aside.pop(), final)
    for stale in moved_aside:
        remove_path(stale)


def temp_sibling(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    return _sibling(".tmp", final)


def write_json_atomic(path: Path, payload: Any) -> None:
    tmp = temp_sibling(path)
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    if not path.exists():
        return default
    return json.loads(path.read_text())


def has_parquet(path: Path) -> bool:
    return path.is_dir() and any(path.rglob("*.parquet"))


def parquet_rows(folder: Path) -> int:
    """Rows of a Parquet folder just written, summed from the files' footers on the driver.
    A Spark count after each write was a job of its own: about a dozen per window, a fixed
    cost whatever the window's size. Spark skips `_`- and `.`-names; so does this (the
    folders counted here are written without `partitionBy`, so no `_k=v` folder occurs)."""
    return sum(pq.read_metadata(f).num_rows for f in folder.rglob("*.parquet")
               if not any(part.startswith(("_", ".")) for part in f.relative_to(folder).parts))

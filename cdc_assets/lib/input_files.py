"""What is waiting in a source's input location, and which of it has not been landed yet.

The sensor compares this cheap listing (path, size, mtime; no hashing) with the files the
landing state has recorded. This module lists a local folder; an object-store prefix
(S3) is listed by swapping `list_input_files` for one that returns the same records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cdc_assets.lib.layouts import detect_layout, list_dump_files
from cdc_assets.lib.settings import SourceConfig
from cdc_assets.lib.watermark_state import LandingState


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    mtime_ns: int


def list_input_files(source: SourceConfig) -> list[InputFile]:
    """The dump files of `source` (its layout's files only), sorted by path; none when the
    folder does not exist yet or holds nothing a layout recognises."""
    root = Path(source.input_path)
    if not root.is_dir():
        return []
    try:
        layout = detect_layout(root) if source.layout == "auto" else source.layout
    except ValueError:
        return []  # empty, or ambiguous: landing would say why; the sensor just waits
    out = []
    for p in list_dump_files(root, layout):
        st = p.stat()
        out.append(InputFile(str(p), st.st_size, st.st_mtime_ns))
    return out


def unlanded_files(files: list[InputFile], state: LandingState) -> list[InputFile]:
    """Files landing has not seen with this size and mtime (new, or rewritten since)."""
    seen = state.fingerprints
    return [f for f in files
            if (fp := seen.get(f.path)) is None or (fp["size"], fp["mtime_ns"]) != (f.size, f.mtime_ns)]


def listing_digest(files: list[InputFile]) -> str:
    """Names a set of files (with their sizes and mtimes): the landing run's run key."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{f.size}\0{f.mtime_ns}\n".encode())
    return h.hexdigest()[:16]

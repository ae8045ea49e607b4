"""A source's input files, and which of them are not landed yet (local folder).

The sensor asks "is there anything new to land?" without Spark and without reading file
contents: a file is compared by size and mtime with what landing fingerprinted. Landing
itself still decides by content digest. The S3 listing (objects under a prefix, compared
with the local mirror) plugs in behind the same two functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cdc_assets.lib.landing import load_state
from cdc_assets.lib.layouts import detect_layout, get_layout
from cdc_assets.lib.settings import SourceConfig


@dataclass(frozen=True)
class InputFile:
    name: str  # path below the dump folder
    size: int
    version: str  # mtime in ns: changes with the content


def list_input_files(source: SourceConfig, landing_root: Path | None = None,
                     s3_client: Any = None) -> list[InputFile]:
    """The source's data files (those of its layout), sorted by name."""
    root = Path(source.input_path)
    return [_local_file(p, root) for p in _local_data_files(source, root)]


def files_not_landed(source: SourceConfig, landing_root: Path, s3_client: Any = None) -> list[InputFile]:
    """Input files that landing has not landed in their current version (new or changed)."""
    root = Path(source.input_path)
    state = load_state(landing_root)
    pending = []
    for path in _local_data_files(source, root):
        digest = state.known_digest(path)
        if digest is None or digest not in state.landed_digests:
            pending.append(_local_file(path, root))
    return pending


def _local_data_files(source: SourceConfig, root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    try:
        layout = detect_layout(root) if source.layout == "auto" else source.layout
    except (ValueError, OSError):
        return []  # nothing detectable yet: landing would say why, the sensor just waits
    return get_layout(layout).list_files(root)


def _local_file(path: Path, root: Path) -> InputFile:
    st = path.stat()
    return InputFile(PurePosixPath(path.relative_to(root)).as_posix(), st.st_size, str(st.st_mtime_ns))

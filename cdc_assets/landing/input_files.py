"""A source's input files, in a local folder or under an S3 prefix, and which are not landed.

`files_not_landed` answers a sensor's question "is there anything new to land?" without
Spark and without reading file contents: a local file is compared by size and mtime with
what landing fingerprinted; an S3 object by ETag and size with what the mirror holds, and
then the mirrored copy like a local file. Landing itself still decides by content digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Any, Callable

from cdc_assets.common.settings import SourceConfig
from cdc_assets.common.warehouse import as_warehouse
from cdc_assets.landing.land import changed_within
from cdc_assets.landing.layouts import AUTO_LAYOUT, LAYOUT_CLASSES, detect_layout, get_layout
from cdc_assets.landing.layouts.base import is_hidden_name
from cdc_assets.landing.s3_input import MirrorResult, is_s3_uri, list_objects, mirror_prefix, not_mirrored
from cdc_assets.landing.tables import load_state

CHECKPOINT_FILE = "metadata"  # the storage sink's checkpoint-ts: needed to move its watermark


@dataclass(frozen=True)
class InputFile:
    name: str  # path below the dump folder or the S3 prefix
    size: int
    version: str  # mtime in ns (local file) or ETag (S3 object): changes with the content


def mirror_root(warehouse, source_name: str) -> Path:
    """The local folder an S3 source's objects are mirrored to (`Warehouse.input_mirror`)."""
    return as_warehouse(warehouse).input_mirror(source_name)


def local_dump_root(source: SourceConfig, warehouse) -> Path:
    """The folder landing reads: the source's folder, or the local mirror of its S3 prefix."""
    return mirror_root(warehouse, source.name) if is_s3_uri(source.input_path) else Path(source.input_path)


def resolved_layout(source: SourceConfig, root: Path) -> str | None:
    """The configured layout, or the detected one; None while nothing is detectable."""
    if source.layout != AUTO_LAYOUT:
        return source.layout
    try:
        return detect_layout(root)
    except (ValueError, OSError):
        return None


def wanted_object(layout: str) -> Callable[[PurePath], bool]:
    """Which paths below an S3 prefix to mirror: data of the layout (of any layout with
    `auto`), data it cannot read (so the landing names them), and the storage sink's
    checkpoint file. A layout named explicitly: every object that is not hidden, which the
    landing reads as that layout or reports with why not (`DumpLayout.scan_named`)."""
    layouts = list(LAYOUT_CLASSES.values()) if layout == AUTO_LAYOUT else [get_layout(layout)]

    def wanted(relative: PurePath) -> bool:
        if layout != AUTO_LAYOUT:
            return not any(is_hidden_name(part) for part in relative.parts)
        return str(relative) == CHECKPOINT_FILE or any(
            lay.is_data_file(relative) or lay.unsupported(relative) for lay in layouts)

    return wanted


def sync_s3_source(source: SourceConfig, warehouse, s3_client: Any) -> MirrorResult:
    """Download the source's new S3 objects into its mirror (see `s3_input.mirror_prefix`)."""
    mirror = mirror_root(warehouse, source.name)
    mirror.mkdir(parents=True, exist_ok=True)
    return mirror_prefix(s3_client, source.input_path, mirror, wanted_object(source.layout))


def list_input_files(source: SourceConfig, s3_client: Any = None) -> list[InputFile]:
    """The source's data files: a local folder's files of its layout, or the objects under
    its S3 prefix that would be mirrored (`s3_client` required)."""
    if is_s3_uri(source.input_path):
        if s3_client is None:
            raise ValueError(f"source {source.name!r} reads {source.input_path}: an S3 client is needed")
        return [InputFile(str(o.relative), o.size, o.etag)
                for o in list_objects(s3_client, source.input_path, wanted_object(source.layout))]
    root = Path(source.input_path)
    return [_local_file(p, root) for p in _local_data_files(source, root)]


def files_not_landed(source: SourceConfig, warehouse, s3_client: Any = None) -> list[InputFile]:
    """Input files that landing has not landed in their current version (new or changed).

    For an S3 source: the objects the mirror does not hold yet, plus mirrored files that
    were not landed (a landing that failed after downloading)."""
    pending: list[InputFile] = []
    root = local_dump_root(source, warehouse)
    if is_s3_uri(source.input_path):
        if s3_client is None:
            raise ValueError(f"source {source.name!r} reads {source.input_path}: an S3 client is needed")
        objects = list_objects(s3_client, source.input_path, wanted_object(source.layout))
        pending += [InputFile(str(o.relative), o.size, o.etag) for o in not_mirrored(objects, root)]
    state = load_state(warehouse, source.name)
    seen = {f.name for f in pending}
    for path in _local_data_files(source, root):
        digest = state.known_digest(path)
        if (digest is None or digest not in state.landed_digests) and _local_file(path, root).name not in seen:
            pending.append(_local_file(path, root))
    return pending


def settled(source: SourceConfig, warehouse, files: list[InputFile], settle_seconds: int) -> bool:
    """Whether none of `files` changed in the last `settle_seconds`: the landing no longer
    waits for any of them, even if one is cut short (landing/land.py). S3 objects not yet
    mirrored appear whole, so they count as settled."""
    root = local_dump_root(source, warehouse)
    return not any(changed_within(path, settle_seconds) for path in (root / f.name for f in files) if path.is_file())


def _local_data_files(source: SourceConfig, root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    layout = resolved_layout(source, root)
    if not layout:
        return []
    # Files the layout cannot read count as new too: their landing stops with the reason.
    # A layout named explicitly reads files of other names too (those it skips are reported).
    if source.layout != AUTO_LAYOUT:
        data, refused, _ = get_layout(layout).scan_named(root)
    else:
        data, refused = get_layout(layout).scan(root)
    return data + list(refused)


def _local_file(path: Path, root: Path) -> InputFile:
    st = path.stat()
    return InputFile(PurePosixPath(path.relative_to(root)).as_posix(), st.st_size, str(st.st_mtime_ns))

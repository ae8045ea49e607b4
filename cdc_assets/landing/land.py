"""Incremental, idempotent landing of a topic dump into the warehouse's landing tables.

Landing reads only files it has not landed before (by content hash), places every
message in the window of its routing time, and keeps the only cross-window state the
pipeline needs: per Kafka partition the highest offset and highest watermark seen, and
an index of watermark messages (for the late-event rule). Landing the same files again
changes nothing. A new file cut short (a Parquet file without its footer, a kcat file
ending in part of a record) that changed in the last `settle_seconds` is still being written:
the landing waits, landing nothing, and the next landing tries again. One cut short longer
ago was left so by a writer that died: a line file is landed as it is (the cut record is
quarantined), a Parquet file is left out and reported on every landing.

The landing area is three Iceberg tables of the source's namespace (the messages, the
watermark index and the state, which is the commit point; tables and commit protocol in
landing/tables.py): nothing but the warehouse's catalog, so a local folder or an `s3://`
warehouse alike, and one writer at a time by optimistic concurrency, not a lock.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.errors import PythonException
from pyspark.sql import SparkSession, functions as F

from cdc_assets.decode import Decoder
from cdc_assets.landing.batch_stats import collect_stats
from cdc_assets.landing.layouts import get_layout
from cdc_assets.landing.routing import landed_rows, routed_messages
from cdc_assets.landing.state import LandingState, UnroutableFile
from cdc_assets.landing.tables import (
    BATCH_COLUMN, LANDED_MESSAGES, LANDING_WATERMARKS, WINDOW_COLUMN, append_batch, batch_rows, commit_state,
    landing_table, remove_uncommitted_batches, start_landing,
)
from cdc_assets.landing.watermark_audit import regressions_by_partition
from cdc_assets.landing.window_messages import WATERMARK_COLUMNS, read_watermark_index


# A file cut short that has not changed for this long is no longer being written
# (the default of `Settings.settle_seconds`).
SETTLE_SECONDS = 600


@dataclass(frozen=True)
class LandingResult:
    new_files: int
    skipped_files: int
    messages: int
    batch_id: str | None
    state: LandingState
    # Watermarks ignored in this landing, per "topic/partition" (see landing/watermark_audit.py).
    regressed_watermarks: dict[str, int] = field(default_factory=dict)
    implausible_watermarks: dict[str, int] = field(default_factory=dict)
    # New files cut short (no Parquet footer, a kcat record cut mid-line) and changed within
    # `settle_seconds`: still being written, so nothing is landed (module docstring).
    waiting_files: list[str] = field(default_factory=list)
    # Files cut short longer ago that cannot be read (Parquet): left out, reported each time.
    unreadable_files: list[str] = field(default_factory=list)
    # This landing's messages without a usable time of their protocol (`unroutable_reason`),
    # per file (relative path), files with any only.
    unroutable_files: dict[str, UnroutableFile] = field(default_factory=dict)
    # Files of the input not read as the layout, and why (a layout named explicitly: `scan_named`).
    ignored_files: dict[str, str] = field(default_factory=dict)
    # How long the commit of the state took (pyiceberg; None: nothing committed).
    state_commit_seconds: float | None = None


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def land(
    spark: SparkSession,
    *,
    dump_root: Path,
    layout: str,
    decoder: Decoder,
    warehouse,
    source: str,
    window_ms: int,
    settle_seconds: int = SETTLE_SECONDS,
    layout_named: bool = False,
    layout_options: Mapping[str, str] | None = None,
) -> LandingResult:
    """Land the new files of `dump_root` into `source`'s landing tables of `warehouse` (a
    location only the catalog helpers open). `layout_named`: the user named the layout (not
    detected): every non-hidden file of the dump is read as it, or reported in `ignored_files`
    with why not (`DumpLayout.scan_named`). `layout_options`: the layout's own
    (`DumpLayout.default_options`). A LandingConflict when another landing of the source
    committed meanwhile (landing/tables.py)."""
    start = start_landing(warehouse, source)
    state = start.state
    state.check_window_ms(window_ms)
    # Read the layout's checkpoint before listing: a file written after the listing is
    # then not covered by a checkpoint we record now.
    dump_layout = get_layout(layout, layout_options)
    checkpoint = dump_layout.checkpoint_ts(dump_root)
    if layout_named:
        files, refused, ignored_paths = dump_layout.scan_named(dump_root)
    else:
        (files, refused), ignored_paths = dump_layout.scan(dump_root), {}
    ignored = {str(p.relative_to(dump_root)): why for p, why in ignored_paths.items()}
    if refused:
        raise ValueError(f"{len(refused)} file(s) under {dump_root} cannot be read as {layout}: "
                         + "; ".join(f"{path.relative_to(dump_root)}: {reason}"
                                     for path, reason in list(refused.items())[:5]))
    cut = _cut_files(files, dump_layout, state)
    waiting = [p for p in cut if changed_within(p, settle_seconds)]
    # Cut files that stopped changing were left so by a writer that died: line files are
    # landed as they are (the cut record is quarantined); others cannot be read at all.
    unreadable = [] if dump_layout.cut_files_readable else [p for p in cut if p not in waiting]
    if waiting:
        # Landing the others could move a partition's watermark past messages of a
        # waiting file, which would then arrive late: wait for the whole set.
        return LandingResult(0, 0, 0, None, state, waiting_files=_names(waiting, dump_root),
                             unreadable_files=_names(unreadable, dump_root), ignored_files=ignored)
    files = [p for p in files if p not in unreadable]
    before = state.to_document()
    new: dict[str, Path] = {}
    for path in files:
        digest = state.known_digest(path)
        if digest is None:
            digest = file_digest(path)
        if digest not in state.landed_digests and digest not in new:
            new[digest] = path
        state.remember_file(path, digest)
    skipped = len(files) - len(new)
    if not new:
        state.apply_checkpoint(checkpoint)
        if state.to_document() != before:  # new fingerprints, a checkpoint
            commit_state(start, state)
            remove_uncommitted_batches(warehouse, start, state)
        return LandingResult(0, skipped, 0, None, state, unreadable_files=_names(unreadable, dump_root),
                             ignored_files=ignored)

    # The files' content names the batch; the suffix tells apart two attempts to land the
    # same files (a landing killed before its state commit, then run again).
    batch_id = hashlib.sha256("".join(sorted(new)).encode()).hexdigest()[:16] + "-" + uuid.uuid4().hex[:8]
    routed = routed_messages(decoder, dump_layout.read(spark, list(new.values()), dump_root), len(state.batches))
    # One pass over the dump's bytes: the messages are written once, by window, in the
    # batch's one commit. The counts, the watermark index and the audit then read the
    # batch's small columns back, not the message values (no cache of the batch in memory).
    try:
        append_batch(spark, landing_table(spark, warehouse, source, LANDED_MESSAGES),
                     landed_rows(routed, window_ms), batch_id, (WINDOW_COLUMN, BATCH_COLUMN))
    except PythonException as exc:  # e.g. an object the layout cannot read: its one line
        raise ValueError(f"cannot land the {layout} files under {dump_root}: {_worker_error(exc)}") from exc
    staged = batch_rows(spark, warehouse, source, batch_id)
    regressed = regressions_by_partition(
        read_watermark_index(spark, warehouse, source, state), staged.where(F.col("watermark_ts").isNotNull()))
    stats = collect_stats(staged, dump_root, window_ms, state)
    append_batch(spark, landing_table(spark, warehouse, source, LANDING_WATERMARKS),
                 staged.where(F.col("watermark_ts").isNotNull()).select(*WATERMARK_COLUMNS).coalesce(1),
                 batch_id, (BATCH_COLUMN,))
    state.apply_batch(batch_id, sorted(new), stats)
    state.record_ignored_watermarks(regressed, stats.implausible_watermarks)
    state.apply_checkpoint(checkpoint)
    commit_state(start, state, batch_id)  # the commit point
    remove_uncommitted_batches(warehouse, start, state)
    return LandingResult(len(new), skipped, stats.messages, batch_id, state,
                         regressed, stats.implausible_watermarks, unreadable_files=_names(unreadable, dump_root),
                         unroutable_files=stats.unroutable_files, ignored_files=ignored,
                         state_commit_seconds=start.commit_seconds)


def changed_within(path: Path, seconds: int) -> bool:
    """Whether a file changed in the last `seconds` (0: never), so its writer may not be done."""
    return seconds > 0 and time.time() - path.stat().st_mtime < seconds


def _cut_files(files: list[Path], layout, state: LandingState) -> list[Path]:
    """New files the layout finds cut short (content already landed is not new)."""
    return [p for p in files if state.known_digest(p) is None and not layout.is_complete(p)
            and file_digest(p) not in state.landed_digests]


def _names(paths: list[Path], root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in paths]


def _worker_error(exc: PythonException) -> str:
    """The error a Python worker raised, without the traceback Spark wraps it in (the layouts'
    errors name the file, partition and offset)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].removeprefix("ValueError: ") if lines else type(exc).__name__

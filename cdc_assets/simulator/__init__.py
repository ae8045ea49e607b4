"""A seeded simulated upstream (TiDB -> TiCDC -> Kafka) that writes topic dumps plus the
true table states a consumer must reproduce. Pure Python + pyarrow; deterministic per seed.

    workload (what happened in TiDB) -> encoder (how the protocol writes it)
        -> kafka (partitions, offsets, watermarks, restart) -> writers (file layout)
    workload -> truth (expected snapshot per window)

Typical use: `generate(tmp_path)` then point the pipeline at `dump_dir` and compare its
snapshots with `truth.json`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cdc_assets.simulator.encoder import KeyValue
from cdc_assets.simulator.kafka import KafkaMessage, RestartPlan, TopicSimulator
from cdc_assets.simulator.protocols import ENCODERS, make_encoder
from cdc_assets.simulator.schema import DEMO_TABLES, ColumnDef, TableDef
from cdc_assets.simulator.truth import TruthRecorder
from cdc_assets.simulator.workload import (
    DEFAULT_DURATION_MS,
    DEFAULT_ROW_CHANGES,
    DEFAULT_START_MS,
    DdlEvent,
    RowChange,
    Transaction,
    Workload,
)
from cdc_assets.simulator.writers import DEFAULT_FILE_SPAN_MS, LAYOUTS, make_writer

DEFAULT_TOPIC = "tidb_cdc"


@dataclass(frozen=True)
class GeneratedDump:
    out_dir: Path
    dump_dir: Path  # out_dir/"dump"; files under dump_dir/<topic>/ (storage-sink: the sink's root)
    truth_path: Path  # out_dir/"truth.json"
    topic: str
    layout: str
    protocol: str
    files: list[Path]
    counts: dict[str, int]  # same as truth.json "counts"
    windows: list[dict] = field(default_factory=list)  # start_ms, end_ms, complete
    final_watermark_ts: int | None = None


def generate(
    out_dir: str | Path,
    *,
    seed: int = 7,
    layout: str = "kafka-parquet",
    protocol: str = "canal-json",
    row_changes: int = DEFAULT_ROW_CHANGES,
    start_ms: int = DEFAULT_START_MS,
    duration_ms: int = DEFAULT_DURATION_MS,
    partitions: int = 3,
    window_ms: int = 3_600_000,
    restart: bool = True,
    topic: str = DEFAULT_TOPIC,
    watermark_interval_ms: int = 60_000,
    watermark_phase_ms: int | None = None,
    file_span_ms: int = DEFAULT_FILE_SPAN_MS,
    tables: tuple[TableDef, ...] = DEMO_TABLES,
    overwrite: bool = False,
    inject: Callable[[KafkaMessage], Iterable[KeyValue]] | None = None,
    writer_options: Mapping[str, Any] | None = None,
) -> GeneratedDump:
    """Simulate the upstream and write `out_dir/dump/<topic>/...` (storage-sink: the sink's
    folders in `out_dir/dump`, without a topic) plus `out_dir/truth.json`.

    `row_changes` counts row events before duplication (a primary-key update counts two:
    its DELETE and its INSERT). With `restart`, the changefeed restarts once in the
    middle of the run and re-sends rows (duplicates and late duplicates); a run too short
    for that (under ~10 minutes) gets no restart and truth.json says `"restart": null`.
    `inject(message)`: (key, value) pairs a broken producer puts in the message's partition just
    before it (fuzzing); later offsets move up, truth.json is unchanged, counts["injected"] counts them.
    `writer_options`: the layout's writer's own (kafka-connect-s3: fmt, flush_size, store_keys, gzip).
    `watermark_phase_ms`: watermarks at this offset past each interval boundary (default: 30 s
    for a protocol that batches events, so that its batches straddle window ends; else 0).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if protocol not in ENCODERS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(sorted(ENCODERS))}")
    if layout == "storage-sink" and protocol != "canal-json":
        raise ValueError("the storage-sink layout holds TiCDC Canal-JSON only")
    out_dir = Path(out_dir)
    dump_dir = out_dir / "dump"
    truth_path = out_dir / "truth.json"
    if dump_dir.exists() and any(dump_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{dump_dir} is not empty (pass overwrite=True to replace it)")
        shutil.rmtree(dump_dir)
    dump_dir.mkdir(parents=True, exist_ok=True)

    workload = Workload(seed=seed, row_changes=row_changes, start_ms=start_ms, duration_ms=duration_ms, tables=tables)
    encoder = make_encoder(protocol, tables)
    plan = RestartPlan.in_the_middle(start_ms, duration_ms, watermark_interval_ms) if restart else None
    if watermark_phase_ms is None:
        watermark_phase_ms = 30_000 if encoder.batch_events > 1 else 0
    topic_sim = TopicSimulator(
        encoder, partitions=partitions, watermark_interval_ms=watermark_interval_ms,
        watermark_phase_ms=watermark_phase_ms, restart=plan, seed=seed,
    )
    truth = TruthRecorder(tables, window_ms=window_ms)
    writer = make_writer(layout, dump_dir, topic, file_span_ms=file_span_ms, **(writer_options or {}))
    shift = [0] * partitions  # offsets taken by injected messages, per partition

    def write(msg: KafkaMessage) -> None:
        for key, value in inject(msg) if inject else ():
            writer.write(replace(msg, offset=msg.offset + shift[msg.partition], key=key, value=value))
            shift[msg.partition] += 1
        writer.write(replace(msg, offset=msg.offset + shift[msg.partition]))

    try:
        for event in workload.events():
            truth.add(event)
            for msg in topic_sim.send(event):
                write(msg)
        for msg in topic_sim.finish():
            write(msg)
    finally:
        files = writer.close()

    stats = topic_sim.stats
    counts = {
        "row_events": stats.row_events,
        "watermarks": stats.watermarks,
        "ddl": stats.ddl,
        "duplicates": stats.duplicates,
        "late": stats.late,
        "resent": stats.duplicates + stats.late,
        "row_changes": truth.row_changes,
        "transactions": truth.transactions,
        "messages": stats.messages,
        "injected": sum(shift),
    }
    header = {
        "topic": topic,
        "protocol": protocol,
        "layout": layout,
        "seed": seed,
        "partitions": partitions,
        "watermark_interval_ms": watermark_interval_ms,
        "watermark_phase_ms": watermark_phase_ms,
        # What `Workload` needs to replay the same events (a brute-force truth at any instant).
        "workload": {"seed": seed, "row_changes": row_changes, "start_ms": start_ms, "duration_ms": duration_ms},
        "counts": counts,
        "partition_messages": stats.partition_messages,
        "restart": stats.restart,
    }
    windows = truth.write(truth_path, final_watermark_ts=stats.final_watermark_ts, header=header)
    return GeneratedDump(
        out_dir=out_dir,
        dump_dir=dump_dir,
        truth_path=truth_path,
        topic=topic,
        layout=layout,
        protocol=protocol,
        files=files,
        counts=counts,
        windows=windows,
        final_watermark_ts=stats.final_watermark_ts,
    )


__all__ = [
    "ColumnDef",
    "DEFAULT_DURATION_MS",
    "DEFAULT_START_MS",
    "DEFAULT_TOPIC",
    "DdlEvent",
    "GeneratedDump",
    "LAYOUTS",
    "RowChange",
    "TableDef",
    "Transaction",
    "Workload",
    "generate",
]

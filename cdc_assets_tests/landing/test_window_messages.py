"""A window's messages hold each Kafka offset once: the newest landing of an offset landed
twice wins, and the copies dropped are counted. The read is pinned: counted with pyiceberg on
the offsets (no Spark job), read back at its landed_messages snapshot, whatever landed since."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_assets.common.spark_session import jobs_since, spark_job_ids
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.decode import get_decoder
from cdc_assets.landing.land import land
from cdc_assets.landing.tables import LANDED_SCHEMA
from cdc_assets.landing.window_messages import (
    MESSAGE_COLUMNS, newest_copies, pin_window_read, read_pinned_messages,
)
from cdc_assets_tests.canal_messages import kcat_file, row, values, watermark

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _row(partition: int, offset: int, value: bytes, source_file: str, landing_seq: int | None):
    return ("cdc", partition, offset, None, None, value, source_file, landing_seq, None)


def test_the_newest_landing_of_a_redelivered_offset_wins(spark):
    landed = spark.createDataFrame([
        _row(0, 0, b"a", "a.jsonl", 0),
        _row(0, 1, b"old", "a.jsonl", 0),
        _row(0, 1, b"new", "b.jsonl", 1),  # landed again by a later landing, other content
        _row(0, 2, b"x", "a.jsonl", 0),
        _row(0, 2, b"y", "c.jsonl", 0),  # twice in one landing: the later file wins
        _row(1, 1, b"other partition", "a.jsonl", 0),
    ], LANDED_SCHEMA)
    rows = sorted((r.kafka_partition, r.kafka_offset, bytes(r.value)) for r in newest_copies(landed, 2).collect())
    assert rows == [(0, 0, b"a"), (0, 1, b"new"), (0, 2, b"y"), (1, 1, b"other partition")]
    # No copy counted: the plan has no sort.
    assert newest_copies(landed, 0) is landed


def _kcat_file(path: Path, partition: int, messages: list[tuple[int, bytes]]) -> None:
    kcat_file(path, partition, messages, T0)


def _land(spark, dump: Path, warehouse: Path):
    return land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"),
                warehouse=warehouse, source="src", window_ms=HOUR)


def test_a_pinned_read_counts_copies_without_spark_and_ignores_later_landings(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    first = [(0, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
             (1, row("INSERT", ms_to_tso(T0 + 20), values(2, "b"))),
             (2, row("INSERT", ms_to_tso(T0 + 30), values(3, "c"))),
             (3, watermark(ms_to_tso(T0 + 2 * HOUR)))]
    _kcat_file(dump / "a.jsonl", 0, first)
    _kcat_file(dump / "overlap.jsonl", 0, first[:2])  # offsets 0 and 1 twice in one landing
    _kcat_file(dump / "b.jsonl", 1, [(0, row("INSERT", ms_to_tso(T0 + HOUR + 5), values(4, "d")))])  # next window
    _land(spark, dump, warehouse)

    before = spark_job_ids()
    read = pin_window_read(warehouse, "src", T0)
    assert jobs_since(before) == 0
    assert (read.landed, read.redelivered, read.messages, len(read.batches)) == (5, 2, 3, 1)

    # A later landing redelivers offset 2 into the window: the pinned read does not see it.
    _kcat_file(dump / "later.jsonl", 0, [(2, row("INSERT", ms_to_tso(T0 + 30), values(3, "c2")))])
    _land(spark, dump, warehouse)
    messages = read_pinned_messages(spark, warehouse, "src", read)
    assert tuple(messages.columns) == MESSAGE_COLUMNS
    assert sorted((r.kafka_partition, r.kafka_offset) for r in messages.collect()) == [(0, 0), (0, 1), (0, 2)]
    assert bytes(messages.where("kafka_offset = 2").first().value) == first[2][1]

    # A new read sees the redelivered copy, counted as such; the newest landing wins.
    again = pin_window_read(warehouse, "src", T0)
    assert (again.landed, again.redelivered, len(again.batches)) == (6, 3, 2)
    newest = read_pinned_messages(spark, warehouse, "src", again).where("kafka_offset = 2").first()
    assert json.loads(newest.value)["data"][0]["name"] == "c2"


def test_a_window_without_landed_messages_reads_empty(spark, tmp_path):
    read = pin_window_read(tmp_path / "warehouse", "src", T0)
    assert (read.snapshot_id, read.landed, read.redelivered, read.batches) == (None, 0, 0, ())
    assert read_pinned_messages(spark, tmp_path / "warehouse", "src", read).count() == 0

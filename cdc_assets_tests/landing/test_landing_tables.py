"""The landing area as Iceberg tables (landing/tables.py): any Iceberg reader sees the landed
messages of the committed batches, and a landing that loses the race to commit its state fails
clearly, leaving nothing visible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.decode import get_decoder
from cdc_assets.landing import land as landing
from cdc_assets.landing.land import land
from cdc_assets.landing.tables import LandingConflict, REMOVED_PROPERTY
from cdc_assets.landing.tables import load_state
from cdc_assets.landing.window_messages import read_watermark_index, read_window_messages
from cdc_assets_tests.canal_messages import kcat_file, row, values, watermark

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _kcat_file(path: Path, partition: int, messages: list[tuple[int, bytes]]) -> None:
    kcat_file(path, partition, messages, T0)


def _land(spark, dump: Path, warehouse: Path):
    return land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"),
                warehouse=warehouse, source="src", window_ms=HOUR)


def test_the_landed_tables_are_read_with_pyiceberg_alone(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    _kcat_file(dump / "a.jsonl", 0, [(0, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
                                     (1, row("INSERT", ms_to_tso(T0 + HOUR + 10), values(2, "b"))),
                                     (2, watermark(ms_to_tso(T0 + 2 * HOUR)))])
    result = _land(spark, dump, warehouse)
    assert result.messages == 3 and result.state_commit_seconds is not None

    from pyiceberg.expressions import In

    catalog = load_pyiceberg_catalog(warehouse)  # no Spark from here on
    (document,) = catalog.load_table(("src", "landing_state")).scan().to_arrow().column("state").to_pylist()
    batches = json.loads(document)["batches"]
    assert [(b["batch_id"], b["windows"]) for b in batches] == [(result.batch_id, [T0, T0 + HOUR, T0 + 2 * HOUR])]
    committed = In("batch_id", [b["batch_id"] for b in batches])
    messages = catalog.load_table(("src", "landed_messages")).scan(row_filter=committed).to_arrow()
    assert sorted(zip(messages.column("window_start_ms").to_pylist(), messages.column("kafka_offset").to_pylist(),
                      messages.column("landing_seq").to_pylist())) == [
        (T0, 0, 0), (T0 + HOUR, 1, 0), (T0 + 2 * HOUR, 2, 0)]
    marks = catalog.load_table(("src", "landing_watermarks")).scan(row_filter=committed).to_arrow().to_pylist()
    assert [(m["kafka_offset"], m["watermark_ts"]) for m in marks] == [(2, ms_to_tso(T0 + 2 * HOUR))]
    # Every append names its batch in its commit's summary.
    summaries = [s.summary.additional_properties for s in catalog.load_table(("src", "landed_messages")).snapshots()]
    assert [s.get("cdc.landing-batch") for s in summaries] == [result.batch_id]

    # Landing the same files again: nothing new, no new commit of the messages.
    again = _land(spark, dump, warehouse)
    assert (again.new_files, again.skipped_files, again.batch_id) == (0, 1, None)
    assert len(catalog.load_table(("src", "landed_messages")).snapshots()) == 1


def test_a_landing_that_loses_the_race_fails_and_leaves_nothing_visible(spark, tmp_path, monkeypatch):
    """Two landings of one source at once: the second to commit its state fails with a clear
    error; its rows are never read, and the next landing deletes them and lands its files."""
    ours, theirs, warehouse = tmp_path / "ours", tmp_path / "theirs", tmp_path / "warehouse"
    _kcat_file(ours / "a.jsonl", 0, [(0, row("INSERT", ms_to_tso(T0 + 10), values(1, "a")))])
    _kcat_file(theirs / "b.jsonl", 1, [(0, row("INSERT", ms_to_tso(T0 + 20), values(2, "b"))),
                                       (1, watermark(ms_to_tso(T0 + HOUR)))])
    commit = landing.commit_state
    raced = []

    def other_landing_commits_first(start, state, batch_id=None):
        if not raced:  # our landing wrote its batch; another one lands and commits now
            raced.append(None)
            raced[0] = _land(spark, theirs, warehouse)
        return commit(start, state, batch_id)

    monkeypatch.setattr(landing, "commit_state", other_landing_commits_first)
    with pytest.raises(LandingConflict, match="another landing of source 'src' committed meanwhile; rerun"):
        _land(spark, ours, warehouse)
    monkeypatch.setattr(landing, "commit_state", commit)

    (theirs_result,) = raced
    state = load_state(warehouse, "src")
    assert [b.batch_id for b in state.batches] == [theirs_result.batch_id]
    assert sorted((r.kafka_partition, r.kafka_offset) for r in read_window_messages(spark, warehouse, "src", T0).collect()) == [
        (1, 0)]
    assert [r.kafka_offset for r in read_watermark_index(spark, warehouse, "src").collect()] == [1]
    # Their landing started after ours appended: once it committed, ours could not, so it
    # deleted our batch's rows (landing/tables.py, step 5).
    table = load_pyiceberg_catalog(warehouse).load_table(("src", "landed_messages"))
    ours_batch = table.metadata.snapshots[0].summary["cdc.landing-batch"]
    assert [s.summary.additional_properties.get(REMOVED_PROPERTY) for s in table.snapshots()] == [
        None, None, ours_batch]
    assert sorted(table.scan().to_arrow().column("kafka_partition").to_pylist()) == [1, 1]

    rerun = _land(spark, ours, warehouse)
    assert (rerun.new_files, rerun.messages) == (1, 1)
    assert sorted((r.kafka_partition, r.kafka_offset) for r in read_window_messages(spark, warehouse, "src", T0).collect()) == [
        (0, 0), (1, 0)]

"""Ordering, dedup, late and snapshot rules on hand-written events (no Dagster)."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import functions as F

from cdc_assets.lib.alignment import aligned_events, count_alignment, mark_late_and_duplicates
from cdc_assets.lib.codecs import get_decoder
from cdc_assets.lib.snapshot import key_actions, reconstruct_table, window_table_schemas
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.helpers import raw_frame

T0 = 1767225600000 << 18  # 2026-01-01T00:00Z as a TSO


def _changes(spark, messages):
    decoded = get_decoder("canal-json").decode(raw_frame(spark, messages))
    return decoded.where(F.col("_reject_reason").isNull())


def _watermarks(spark, messages):
    routed = get_decoder("canal-json").route(raw_frame(spark, messages))
    return routed.where("watermark_ts is not null").select("topic", "kafka_partition", "kafka_offset", "watermark_ts")


def _snapshot(spark, changes, previous=None):
    schemas = window_table_schemas(changes)
    (schema,) = schemas.values()
    result = reconstruct_table(key_actions(changes), schema, previous)
    return result, {r["id"]: r for r in (x.asDict() for x in result.frame.collect())}


def test_late_events_and_duplicates_are_dropped_and_counted(spark):
    msgs = [
        row("INSERT", T0 + 10, values(1, "a")),
        row("INSERT", T0 + 20, values(2, "b")),
        watermark(T0 + 30),
        row("INSERT", T0 + 40, values(3, "c")),
        # changefeed restart: everything after T0 is sent again
        row("INSERT", T0 + 10, values(1, "a")),  # below the earlier watermark: late
        row("INSERT", T0 + 20, values(2, "b")),  # late
        row("INSERT", T0 + 40, values(3, "c")),  # above it: a plain duplicate
    ]
    marked = mark_late_and_duplicates(_changes(spark, msgs), _watermarks(spark, msgs), T0)
    counts = count_alignment(marked)
    assert (counts.events_in, counts.late, counts.duplicates, counts.events_out) == (6, 2, 1, 3)
    kept = aligned_events(marked).orderBy("kafka_offset").select("kafka_offset").collect()
    assert [r.kafka_offset for r in kept] == [0, 1, 3]  # first copies win


def test_watermark_below_window_start_does_not_make_events_late(spark):
    msgs = [watermark(T0 - 5), row("INSERT", T0 + 1, values(1, "a"))]
    marked = mark_late_and_duplicates(_changes(spark, msgs), _watermarks(spark, msgs), T0)
    assert count_alignment(marked).late == 0


def test_latest_version_wins_and_deletes_disappear(spark):
    msgs = [
        row("INSERT", T0 + 1, values(1, "a")),
        row("INSERT", T0 + 2, values(2, "b")),
        row("UPDATE", T0 + 3, values(1, "a2", amount="7.125"), old=values(1, "a")),
        row("DELETE", T0 + 4, values(2, "b")),
    ]
    result, rows = _snapshot(spark, _changes(spark, msgs))
    assert set(rows) == {1}
    assert rows[1]["name"] == "a2" and rows[1]["amount"] == Decimal("7.125")
    assert rows[1]["big"] == Decimal(18446744073709551615)  # bigint unsigned without loss
    assert rows[1]["_cdc_commit_ts"] == T0 + 3
    assert (result.inserted_keys, result.deleted_keys, result.conversion_failures) == (1, 0, 0)


def test_delete_applies_before_insert_at_the_same_commit_ts(spark):
    # A primary-key-changing update: DELETE old key + INSERT new key in one transaction,
    # here also re-using key 1 in the same commit (the INSERT must survive).
    msgs = [
        row("INSERT", T0 + 1, values(1, "old")),
        row("INSERT", T0 + 5, values(1, "new")),
        row("DELETE", T0 + 5, values(1, "old")),
    ]
    _, rows = _snapshot(spark, _changes(spark, msgs))
    assert rows[1]["name"] == "new"


def test_update_with_a_new_key_moves_the_row(spark):
    msgs = [
        row("INSERT", T0 + 1, values(1, "a")),
        row("UPDATE", T0 + 2, values(9, "a"), old=values(1, "a")),
    ]
    _, rows = _snapshot(spark, _changes(spark, msgs))
    assert set(rows) == {9}


def test_binary_values_are_exact_bytes(spark):
    raw = "".join(chr(b) for b in range(256))
    _, rows = _snapshot(spark, _changes(spark, [row("INSERT", T0 + 1, values(1, "a", raw=raw))]))
    assert bytes(rows[1]["raw"]) == bytes(range(256))


def test_previous_snapshot_is_carried_forward(spark):
    first, _ = _snapshot(spark, _changes(spark, [row("INSERT", T0 + 1, values(1, "a")),
                                                 row("INSERT", T0 + 2, values(2, "b"))]))
    prev = first.frame.localCheckpoint()
    result, rows = _snapshot(spark, _changes(spark, [row("DELETE", T0 + 9, values(1, "a")),
                                                     row("INSERT", T0 + 9, values(3, "c"))]), prev)
    assert set(rows) == {2, 3}
    assert (result.previous_rows, result.inserted_keys, result.deleted_keys) == (2, 1, 1)

"""The snapshot stage's shared work over a run's windows (snapshot/window_range.py)."""

from __future__ import annotations

from cdc_assets.snapshot.window_range import window_groups


def test_windows_are_grouped_in_order_up_to_the_row_bound():
    rows = {1: 400, 2: 500, 3: 200, 4: 2_000, 5: 10, 6: 10}
    assert window_groups(list(rows), rows.get, max_rows=1_000) == [[1, 2], [3], [4], [5, 6]]
    assert window_groups([1, 2, 3], rows.get, max_rows=10_000) == [[1, 2, 3]]
    assert window_groups([], rows.get) == []


def test_each_window_reads_its_own_rows_from_the_groups_cache_which_is_dropped_after_it(spark):
    from pyspark.sql import functions as F

    from cdc_assets.snapshot.window_range import prefetched_windows

    rows = [(w, "row" if i % 3 else "ddl", "db", f"t{w}", f"k{w}-{i}") for w in (10, 20, 30) for i in range(6)]
    changes = spark.createDataFrame(rows, "window_start_ms long, event_kind string, database string, "
                                          "`table` string, key string").withColumns({
        "after": F.create_map(F.lit("id"), F.col("key")), "before": F.lit(None).cast("map<string,string>"),
        "column_types": F.create_map(F.lit("id"), F.lit("varchar(8)")), "pk_names": F.array(F.lit("id")),
        "commit_ts": F.lit(1).cast("long"), "source_position": F.lit(None).cast("long"), "topic": F.lit("t"),
        "kafka_partition": F.lit(0), "kafka_offset": F.lit(0).cast("long"), "event_index": F.lit(0),
        "ddl_type": F.lit(None).cast("string"), "ddl_sql": F.when(F.col("event_kind") == "ddl", F.col("key")),
        "op": F.lit("INSERT"),
    })
    reads = []
    windows = prefetched_windows(lambda: reads.append(1) or changes, [[10, 20], [30]])
    # The group's cache, found by its plan (a frame's storage level is its plan's in the cache manager).
    group_rows = changes.where(F.col("window_start_ms").isin(10, 20)).where(F.col("event_kind") == "row")
    found, cached = {}, []
    for start, prefetched in windows:
        cached.append(group_rows.storageLevel.useMemory)
        if prefetched is None:
            found[start] = None
            continue
        found[start] = (sorted(r.key for r in prefetched.rows.collect()), list(prefetched.schemas),
                        sorted(r.ddl_sql for r in prefetched.ddl))
    assert found == {
        10: ([f"k10-{i}" for i in (1, 2, 4, 5)], [("db", "t10")], ["k10-0", "k10-3"]),
        20: ([f"k20-{i}" for i in (1, 2, 4, 5)], [("db", "t20")], ["k20-0", "k20-3"]),
        30: None,  # a group of one window: its own pre-pass
    }
    assert reads == [1]  # read once, for the group of two
    assert cached == [True, True, False]  # dropped once the group was done


def test_a_group_whose_shared_pre_pass_fails_leaves_each_window_its_own(spark):
    from cdc_assets.snapshot.window_range import prefetched_windows

    # No change-table columns: the group's action fails; the windows come without a prefetch.
    broken = spark.createDataFrame([(10, "row")], "window_start_ms long, event_kind string")
    assert list(prefetched_windows(lambda: broken, [[10, 20], [30]])) == [(10, None), (20, None), (30, None)]

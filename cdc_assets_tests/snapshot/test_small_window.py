"""A small window applied in Arrow (snapshot/small_window.py) against Spark's plans for the
same window: the MERGE source and its observed counts (`reconstruct.merge_source`) and the
versions that ended (`history._ended_by_rows`), on a composite key of a bigint and a
datetime, a decimal column, key-changing updates and values that do not convert."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
from pyspark.sql import functions as F

from cdc_assets.common.iceberg_tables import MERGE_PRESENT
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA
from cdc_assets.snapshot.history import _ended_by_rows
from cdc_assets.snapshot.reconstruct import (
    COMMIT_TS_COLUMN, TableSchema, key_actions, merge_source, observed_counts, typed_actions, unsorted_typed_actions,
)
from cdc_assets.snapshot.small_window import apply_actions, ordered_actions
from cdc_assets.snapshot.window_state import Flush

SCHEMA = TableSchema("db", "t", ["k1", "k2", "price", "name"],
                     {"k1": "bigint", "k2": "datetime(3)", "price": "decimal(10,2)", "name": "varchar(20)"},
                     ["k1", "k2"])
TS = 1_767_225_600_000 << 18
D1, D2 = "2026-01-01 10:00:00.125", "2026-01-02 00:00:00.000"


def _row(k1, k2, price, name):
    return {"k1": str(k1), "k2": k2, "price": price, "name": name}


# (op, commit_ts offset, before image, after image)
EVENTS = [
    ("UPDATE", 10, _row(1, D1, "1.00", "a"), _row(1, D1, "1.50", "a2")),  # a row from before, updated
    ("UPDATE", 20, _row(1, D1, "1.50", "a2"), _row(1, D1, "2.50", "a3")),  # and again: a version inside
    ("UPDATE", 20, _row(1, D1, "2.50", "a3"), _row(1, D1, "3.00", "a4")),  # same ts: a zero-lifetime version
    ("DELETE", 30, _row(2, D1, "2.00", "b"), None),  # a row from before, deleted
    ("UPDATE", 40, _row(3, D2, "3.00", "c"), _row(30, D2, "3.00", "c")),  # its key changed: old key deleted
    ("INSERT", 50, None, _row(4, D2, "oops", "d")),  # a value that does not convert
    ("INSERT", 60, None, _row(5, D1, "5.55", "e")),  # a new key
    ("DELETE", 70, _row(6, D1, None, None), None),  # a key the snapshot never had
    ("INSERT", 80, None, _row(7, "not a time", "1", "x")),  # a key that does not convert
    ("INSERT", 90, None, _row(8, D2, "8.00", "h")), ("DELETE", 95, _row(8, D2, "8.00", "h"), None),
    ("UPDATE", 99, _row(9, D2, "9.00", "i"), _row(9, D2, "9.90", "i2")),  # its row was written at a later ts
]
PREVIOUS = [(1, D1, "1.00", "a", 5), (2, D1, "2.00", "b", 5), (3, D2, "3.00", "c", 5), (9, D2, "9.00", "i", 99),
            (10, D2, "10.00", "untouched", 5)]


def _changes(spark):
    data = [(i, op, TS + dt, before, after) for i, (op, dt, before, after) in enumerate(EVENTS)]
    frame = spark.createDataFrame(data, "i long, op string, ts long, before map<string,string>, "
                                        "after map<string,string>")
    image = F.coalesce("after", "before")
    types = F.create_map(*[x for c, t in SCHEMA.mysql_types.items() for x in (F.lit(c), F.lit(t))])
    values = {
        "topic": F.lit("t"), "kafka_partition": F.lit(0), "kafka_offset": F.col("i"), "event_index": F.lit(0),
        "event_kind": F.lit("row"), "op": F.col("op"), "database": F.lit("db"), "table": F.lit("t"),
        "commit_ts": F.col("ts"), "pk_names": F.array(F.lit("k1"), F.lit("k2")),
        "pk_values": F.array(image["k1"], image["k2"]), "before": F.col("before"), "after": F.col("after"),
        "column_types": types,
    }
    return frame.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
                          for f in CHANGE_LOG_SCHEMA.fields])


def _previous(spark):
    rows = spark.createDataFrame([(k1, k2, p, n, TS + ts) for k1, k2, p, n, ts in PREVIOUS],
                                 "k1 string, k2 string, price string, name string, ts long")
    return rows.select(*[F.col(c).cast(SCHEMA.spark_type_of(c)).alias(c) for c in SCHEMA.columns],
                       F.col("ts").alias(COMMIT_TS_COLUMN))


def _sorted(rows):
    return sorted((tuple(r.values()) for r in rows), key=repr)


def test_the_arrow_window_selects_and_counts_what_sparks_plans_do(spark):
    actions = key_actions(_changes(spark))
    typed = typed_actions(actions, SCHEMA).persist()
    # The actions ordered in Arrow: each one's flags and next action as Spark's sort gives them.
    ordered = ordered_actions(unsorted_typed_actions(actions, SCHEMA).toArrow(), len(SCHEMA.primary_key))
    flags = ["_cdc_kind", "_cdc_k0", "_cdc_k1", "commit_ts", "op", "_cdc_key_ok", "_cdc_first", "_cdc_keep",
             "_cdc_next_ts", "_cdc_next_op", "_cdc_value_failures"]
    kept = "_cdc_keep OR _cdc_first OR (_cdc_key_ok AND _cdc_kind = 'upsert' AND _cdc_next_ts > commit_ts)"
    assert _sorted(ordered.select(flags).to_pylist()) == _sorted(typed.where(kept).select(flags).toArrow().to_pylist())
    assert ordered.num_rows < typed.count()  # an action that neither decides, starts nor ends is left out
    previous = _previous(spark)

    spark_source = merge_source(typed, SCHEMA, previous)
    source_rows = [r.asDict() for r in spark_source.merge_source.collect()]
    spark_counts = observed_counts(spark_source.observed)
    spark_versions = [r.asDict() for r in _ended_by_rows(Flush(("db", "t"), typed, previous, SCHEMA)).collect()]

    base = previous.toArrow()
    applied = apply_actions(ordered, base, SCHEMA, base.schema)

    assert applied.counts == spark_counts
    assert spark_counts == {"inserted_keys": 3, "deleted_keys": 2, "conversion_failures": 2,
                            "duplicate_source_keys": 0, "matched_keys": 4}
    assert _sorted(applied.source.to_pylist()) == _sorted(source_rows)
    assert _sorted(applied.versions.to_pylist()) == _sorted(spark_versions)
    by_key = {(r["k1"], r[MERGE_PRESENT]): r for r in applied.source.to_pylist()}
    assert by_key[(1, True)]["price"] == Decimal("3.00") and by_key[(1, True)]["name"] == "a4"
    assert by_key[(4, True)]["price"] is None  # "oops" did not convert
    assert (3, None) in by_key and (30, True) in by_key and (2, None) in by_key
    # The versions of key 1: from before (to its first update), and the one inside the window
    # (the zero-lifetime one at ts 20 is left out); key 9's row was newer than its update.
    key1 = sorted((r["_cdc_valid_from"] - TS, r["_cdc_valid_to"] - TS, r["_cdc_end_op"])
                  for r in applied.versions.to_pylist() if r["k1"] == 1)
    assert key1 == [(5, 10, "UPDATE"), (10, 20, "UPDATE")]
    assert not [r for r in applied.versions.to_pylist() if r["k1"] == 9]

    # In the Iceberg table's own Arrow types (pyiceberg's: large strings, a bigint key as
    # int64), the same rows: the typed keys are cast to the table's to join.
    table_schema = pa.schema([f.with_type(pa.large_string()) if pa.types.is_string(f.type) else f for f in base.schema])
    in_table_types = apply_actions(ordered, base.cast(table_schema), SCHEMA, table_schema)
    assert in_table_types.counts == spark_counts
    assert in_table_types.source.schema.field("name").type == pa.large_string()
    assert _sorted(in_table_types.source.to_pylist()) == _sorted(source_rows)
    assert _sorted(in_table_types.versions.to_pylist()) == _sorted(spark_versions)
    typed.unpersist()

"""Ordering, dedup, late and snapshot rules on hand-written events (no Dagster)."""

from __future__ import annotations

import json
from decimal import Decimal

from pyspark.sql import functions as F, types as T

from cdc_assets.align.change_table import aligned_events, mark_late_and_duplicates
from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.reconstruct import TableSchema, key_actions, reconstruct_table, typed_actions
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.helpers import count_alignment, raw_frame

T0 = 1767225600000 << 18  # 2026-01-01T00:00Z as a TSO


def _changes(spark, messages):
    decoded = get_decoder("canal-json").decode(raw_frame(spark, messages))
    return decoded.where(F.col("_reject_reason").isNull())


def _watermarks(spark, messages):
    routed = get_decoder("canal-json").route(raw_frame(spark, messages))
    return routed.where("watermark_ts is not null").select("topic", "kafka_partition", "kafka_offset", "watermark_ts")


def _msg(op: str, ts: int, data: dict, types: dict, pk: list[str], old: dict | None = None) -> bytes:
    """A Canal-JSON row message with its own column types and primary key."""
    return json.dumps({
        "id": 0, "database": "db", "table": "t", "pkNames": pk, "isDdl": False, "type": op,
        "es": ts >> 18, "ts": ts >> 18, "sql": "", "sqlType": {}, "mysqlType": types,
        "data": [data], "old": [old] if old else None, "_tidb": {"commitTs": ts},
    }).encode()


def _by(frame, *key):
    return {tuple(r[k] for k in key) if len(key) > 1 else r[key[0]]: r.asDict() for r in frame.collect()}


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


def test_a_known_previous_row_count_is_taken_when_no_column_changes_type(spark):
    first, _ = _snapshot(spark, _changes(spark, [row("INSERT", T0 + 1, values(1, "a")),
                                                 row("INSERT", T0 + 2, values(2, "b"))]))
    prev = first.frame.localCheckpoint()
    changes = _changes(spark, [row("DELETE", T0 + 9, values(1, "a")), row("INSERT", T0 + 9, values(3, "c"))])
    # The count given (the manifest's) is used as it is: no job recounts the previous rows.
    result = reconstruct_table(key_actions(changes), first.schema, prev, previous_rows=7)
    assert (result.previous_rows, result.inserted_keys, result.deleted_keys, result.conversion_failures) == (
        7, 1, 1, 0)
    assert set(_by(result.frame, "id")) == {2, 3}


def test_a_known_previous_row_count_still_counts_retyping_failures(spark):
    before = TableSchema("db", "t", ["id", "code"], {"id": "int", "code": "varchar"}, ["id"])
    prev = spark.createDataFrame([(1, "abc", T0), (2, "12", T0)], before.spark_schema()).localCheckpoint()
    types = {"id": "int", "code": "int"}
    changes = _changes(spark, [_msg("INSERT", T0 + 5, {"id": "3", "code": "7"}, types, ["id"])])
    schema = before.merged_with(window_table_schemas(changes)[("db", "t")])
    result = reconstruct_table(key_actions(changes), schema, prev, previous_rows=99)
    # A column changed type: the previous rows are read again, counted and checked.
    assert (result.previous_rows, result.inserted_keys, result.conversion_failures) == (2, 1, 1)


def test_previous_snapshot_is_retyped_with_try_cast_and_failures_counted(spark):
    big = "1" * 36 + ".25"  # 36 integer digits: Decimal(38,2) holds it, Decimal(38,5) cannot
    before = TableSchema("db", "t", ["id", "code", "small", "amount"],
                         {"id": "int", "code": "varchar", "small": "int", "amount": "decimal"}, ["id"],
                         {"amount": 2}, {"amount": 36})
    prev = spark.createDataFrame([(1, "abc", 300, Decimal(big), T0), (2, "12", 5, Decimal("1.50"), T0)],
                                 before.spark_schema()).localCheckpoint()
    # A later window: code is now int, small tinyint, and amount shows a larger scale.
    types = {"id": "int", "code": "int", "small": "tinyint", "amount": "decimal"}
    changes = _changes(spark, [_msg("INSERT", T0 + 5, {"id": "3", "code": "7", "small": "1", "amount": "0.12345"},
                                    types, ["id"])])
    (window,) = window_table_schemas(changes).values()
    assert (window.decimal_scales, window.decimal_integer_digits) == ({"amount": 5}, {"amount": 0})
    actions = key_actions(changes)

    # 36 + 5 digits exceed 38: the column becomes exact text rather than losing digits.
    schema = TableSchema.from_json(before.to_json()).merged_with(window)
    assert schema.spark_type_of("amount") == T.StringType()
    result = reconstruct_table(actions, schema, prev)
    rows = _by(result.frame, "id")
    assert rows[1] == {"id": 1, "code": None, "small": None, "amount": big, "_cdc_commit_ts": T0}
    assert (rows[2]["code"], rows[2]["small"], rows[2]["amount"]) == (12, 5, "1.50")
    assert (rows[3]["code"], rows[3]["small"], rows[3]["amount"]) == (7, 1, "0.12345")
    # 'abc' -> int and 300 -> tinyint do not convert: null, and counted
    assert (result.previous_rows, result.inserted_keys, result.conversion_failures) == (2, 1, 2)

    # A manifest written before integer digits were tracked: Decimal(38,5) overflows -> counted.
    legacy = {k: v for k, v in before.to_json().items() if k != "decimal_integer_digits"}
    schema = TableSchema.from_json(legacy).merged_with(window)
    assert schema.spark_type_of("amount") == T.DecimalType(38, 5)
    result = reconstruct_table(actions, schema, prev)
    rows = _by(result.frame, "id")
    assert (rows[1]["amount"], rows[2]["amount"], rows[3]["amount"]) == (None, Decimal("1.5"), Decimal("0.12345"))
    assert result.conversion_failures == 3


def test_table_schema_json_round_trip():
    s = TableSchema("db", "t", ["id", "amount"], {"id": "int", "amount": "decimal"}, ["id"], {"amount": 3},
                    {"amount": 20})
    assert TableSchema.from_json(json.loads(json.dumps(s.to_json()))) == s
    old = {"database": "db", "table": "t", "columns": ["id"], "mysql_types": {"id": "int"}, "primary_key": ["id"]}
    assert TableSchema.from_json(old) == TableSchema("db", "t", ["id"], {"id": "int"}, ["id"])


def test_primary_key_change_types_keys_by_name_and_skips_actions_of_another_key(spark):
    types = {"id": "int", "code": "int", "name": "varchar"}
    before = TableSchema("db", "t", ["id", "code", "name"], types, ["code"])
    prev = spark.createDataFrame([(1, 7, "a", T0), (2, 1, "b", T0)], before.spark_schema()).localCheckpoint()
    msgs = [
        # Old-key (id) events: key "1" is id 1, not code 1; they must not touch code 1.
        _msg("DELETE", T0 + 1, {"id": "1", "code": "7", "name": "a"}, types, ["id"]),
        _msg("INSERT", T0 + 2, {"id": "4", "code": "9", "name": "old-key"}, types, ["id"]),
        # Current-key (code) events; the same key text "4" as the old-key insert.
        _msg("INSERT", T0 + 3, {"id": "5", "code": "4", "name": "d"}, types, ["code"]),
        _msg("DELETE", T0 + 4, {"code": "x"}, types, ["code"]),  # key does not type as int
    ]
    changes = _changes(spark, msgs)
    (window,) = window_table_schemas(changes).values()
    schema = before.merged_with(window)
    assert schema.primary_key == ["code"]
    result = reconstruct_table(key_actions(changes), schema, prev)
    rows = _by(result.frame, "code")
    assert {c: (r["id"], r["name"]) for c, r in rows.items()} == {7: (1, "a"), 1: (2, "b"), 4: (5, "d")}
    assert (result.inserted_keys, result.deleted_keys, result.conversion_failures) == (1, 0, 3)


def test_the_latest_action_per_typed_key_wins_and_an_untyped_key_counts_once(spark):
    """Every action is typed and sorted once (the history reads them too): the latest per key
    decides the row, and a key that does not type counts once, however many actions it has."""
    types = {"id": "int", "code": "int", "name": "varchar"}
    before = TableSchema("db", "t", ["id", "code", "name"], types, ["code"])
    prev = spark.createDataFrame([(1, 7, "a", T0), (2, 1, "b", T0)], before.spark_schema()).localCheckpoint()
    msgs = [
        _msg("INSERT", T0 + 1, {"id": "3", "code": "4", "name": "x1"}, types, ["code"]),
        _msg("UPDATE", T0 + 2, {"id": "3", "code": "4", "name": "x2"}, types, ["code"], old={"name": "x1"}),
        _msg("UPDATE", T0 + 3, {"id": "2", "code": "5", "name": "b"}, types, ["code"], old={"code": "1"}),
        _msg("DELETE", T0 + 4, {"code": "x"}, types, ["code"]),  # does not type as int ...
        _msg("INSERT", T0 + 5, {"id": "9", "code": "x", "name": "bad"}, types, ["code"]),  # ... twice
        _msg("INSERT", T0 + 6, {"id": "8", "code": "6", "name": "n"}, types, ["code"]),
        _msg("DELETE", T0 + 7, {"id": "8", "code": "6", "name": "n"}, types, ["code"]),
    ]
    changes = _changes(spark, msgs)
    (window,) = window_table_schemas(changes).values()
    schema = before.merged_with(window)
    result = reconstruct_table(key_actions(changes), schema, prev)
    rows = _by(result.frame, "code")
    assert {c: (r["id"], r["name"]) for c, r in rows.items()} == {7: (1, "a"), 4: (3, "x2"), 5: (2, "b")}
    assert (result.inserted_keys, result.deleted_keys, result.conversion_failures) == (2, 1, 1)

    typed = typed_actions(key_actions(changes), schema)
    places = sorted((r._cdc_k0, r.commit_ts - T0, r._cdc_kind, r._cdc_first, r._cdc_keep,
                     None if r._cdc_next_ts is None else r._cdc_next_ts - T0, r._cdc_next_op)
                    for r in typed.where("_cdc_key_ok").collect())
    assert places == [
        (1, 3, "delete", True, True, None, None),
        (4, 1, "upsert", True, False, 2, "UPDATE"),
        (4, 2, "upsert", False, True, None, None),
        (5, 3, "upsert", True, True, None, None),
        (6, 6, "upsert", True, False, 7, "DELETE"),
        (6, 7, "delete", False, True, None, None),
    ]


def test_key_values_are_matched_by_name_across_pk_orders(spark):
    types = {"code": "int", "region": "varchar", "name": "varchar"}
    before = TableSchema("db", "t", ["code", "region", "name"], types, ["region", "code"])
    prev = spark.createDataFrame([(4, "us", "old", T0), (4, "eu", "other", T0)],
                                 before.spark_schema()).localCheckpoint()
    msgs = [
        _msg("UPDATE", T0 + 2, {"code": "4", "region": "us", "name": "mid"}, types, ["code", "region"],
             old={"name": "old"}),
        _msg("UPDATE", T0 + 3, {"code": "4", "region": "us", "name": "new"}, types, ["region", "code"],
             old={"name": "mid"}),
    ]
    changes = _changes(spark, msgs)
    (window,) = window_table_schemas(changes).values()
    result = reconstruct_table(key_actions(changes), before.merged_with(window), prev)
    rows = _by(result.frame, "region", "code")
    assert {k: r["name"] for k, r in rows.items()} == {("us", 4): "new", ("eu", 4): "other"}
    assert (result.inserted_keys, result.deleted_keys, result.conversion_failures) == (0, 0, 0)


def test_window_columns_are_the_union_over_its_events(spark):
    full = {"id": "int", "name": "varchar", "amount": "decimal", "extra": "varchar"}
    msgs = [
        _msg("INSERT", T0 + 3, {"id": "3", "name": "c", "extra": "x"}, full, ["id"]),
        _msg("INSERT", T0 + 1, {"id": "1", "name": "a", "amount": "-0012.5"}, full, ["id"]),
        _msg("DELETE", T0 + 5, {"id": "2"}, {"id": "bigint"}, ["id"]),  # newest, minimal image
    ]
    result, rows = _snapshot(spark, _changes(spark, msgs))
    s = result.schema
    assert s.columns == ["id", "name", "amount", "extra"]  # first appearance in commit order
    assert s.mysql_types == {"id": "bigint", "name": "varchar", "amount": "decimal", "extra": "varchar"}
    assert (s.decimal_scales, s.decimal_integer_digits) == ({"amount": 1}, {"amount": 2})
    assert rows == {
        1: {"id": 1, "name": "a", "amount": Decimal("-12.5"), "extra": None, "_cdc_commit_ts": T0 + 1},
        3: {"id": 3, "name": "c", "amount": None, "extra": "x", "_cdc_commit_ts": T0 + 3},
    }


def test_value_failures_of_each_action_are_its_non_null_values_that_do_not_type(spark):
    """`_cdc_value_failures` against a count in Python, on a 40-column table: a failing value
    counts, a null or a typed one does not, nor a key column (`_cdc_key_ok` counts it) or an
    image column the schema does not have."""
    columns = ["id"] + [f"c{i:02d}" for i in range(40)]
    types = {"id": "int", **{c: ("int" if i % 2 else "varchar(8)") for i, c in enumerate(columns[1:])}}
    def image(key: int, bad: set[int]) -> dict:
        out = {c: (None if i % 7 == 0 else "x" if i in bad else str(i)) for i, c in enumerate(columns[1:])}
        return {"id": str(key), **out, "not_in_schema": "x"}
    images = [image(1, set()), image(2, {1, 3, 5, 6}), image(3, {9, 14, 39}), image(4, {2, 4})]
    changes = _changes(spark, [_msg("INSERT", T0 + i, d, types, ["id"]) for i, d in enumerate(images)]
                       + [_msg("DELETE", T0 + 9, image(2, {1}), types, ["id"])])
    schema = TableSchema("db", "t", columns, types, ["id"])
    got = {(r.op, r._cdc_k0): r._cdc_value_failures for r in typed_actions(key_actions(changes), schema).collect()}

    def expected(d: dict) -> int:
        return sum(1 for c in columns[1:] if d[c] is not None and types[c] == "int" and not d[c].isdigit())
    assert got == {**{("INSERT", i + 1): expected(d) for i, d in enumerate(images)}, ("DELETE", 2): 0}
    assert [got[("INSERT", k)] for k in (1, 2, 3, 4)] == [0, 3, 2, 0]


def test_value_failures_of_a_keyless_table_and_of_a_table_of_key_columns_only(spark):
    """Without a primary key every column's value counts (no sort: the actions are not
    ordered); with only key columns, none does (a key that does not type is `_cdc_key_ok`'s).
    Names are matched exactly: `Amount` is not the schema's `amount`."""
    types = {"id": "int", "amount": "int", "note": "varchar(8)"}
    changes = _changes(spark, [
        _msg("INSERT", T0 + 1, {"id": "x", "amount": "y", "note": "z", "Amount": "w"}, types, ["id"]),
        _msg("INSERT", T0 + 2, {"id": "1", "amount": None, "note": "z"}, types, ["id"]),
    ])
    keyless = TableSchema("db", "t", ["id", "amount", "note"], types, [])
    got = sorted(r._cdc_value_failures for r in typed_actions(key_actions(changes), keyless).collect())
    assert got == [0, 2]

    only_keys = TableSchema("db", "t", ["id", "amount"], types, ["id", "amount"])
    rows = typed_actions(key_actions(changes), only_keys).collect()
    assert [(r._cdc_key_ok, r._cdc_value_failures) for r in rows] == [(False, 0), (False, 0)]

"""The DDL barrier engine on hand-made change-log rows: structure from the protocol, ties at
one commit_ts, unparseable DDL."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA
from cdc_assets.snapshot.reconstruct import TableSchema, stores_as
from cdc_assets.snapshot.timeline import apply_window
from cdc_assets.snapshot.window_state import TableState

TS = 1_000 << 18


def _event(offset: int, ts: int, kind: str = "row", partition: int = 0, **fields) -> dict:
    base = {f.name: None for f in CHANGE_LOG_SCHEMA.fields}
    base.update(topic="t", kafka_partition=partition, kafka_offset=offset, event_index=0, event_kind=kind,
                database="db", table="t", commit_ts=ts)
    base.update(fields)
    return base


def _insert(offset: int, ts: int, values: dict, types: dict, partition: int = 0) -> dict:
    return _event(offset, ts, partition=partition, op="INSERT", pk_names=["id"], pk_values=[values["id"]],
                  after=values, column_types=types)


def _ddl(offset: int, ts: int, sql: str, declared: dict | None = None, pk=None) -> dict:
    return _event(offset, ts, kind="ddl", ddl_type="ALTER", ddl_sql=sql, column_types=declared, pk_names=pk)


def _apply(spark, events):
    df = spark.createDataFrame(events, CHANGE_LOG_SCHEMA)
    result = apply_window(spark, df, {})
    out = {n: (s.schema, sorted(tuple(r) for r in s.frame.drop("_cdc_commit_ts").collect()))
           for n, s in result.tables.items()}
    unparsed = result.unparsed_ddl
    result.release()
    return out, unparsed


def test_structure_from_the_protocol_wins_and_the_sql_still_renames(spark):
    types = {"id": "int", "a": "varchar(5)", "b": "int"}
    out, unparsed = _apply(spark, [
        _insert(0, TS, {"id": "1", "a": "x", "b": "2"}, types),
        # The SQL renames a -> a2; the structure also says c is now a bigint and b is gone.
        _ddl(1, TS + 10, "ALTER TABLE t RENAME COLUMN a TO a2",
             {"id": "int", "a2": "varchar(5)", "c": "bigint"}, ["id"]),
        # Unparseable text: the structure alone decides.
        _ddl(2, TS + 20, "ALTER TABLE t SOMETHING sqlglot DOES NOT KNOW",
             {"id": "int", "a2": "varchar(5)", "c": "bigint", "d": "int"}, ["id"]),
    ])
    schema, rows = out[("db", "t")]
    # (maps built by createDataFrame have no order, so the first columns' order is not asserted)
    assert sorted(schema.columns[:2]) == ["a2", "id"] and schema.columns[2:] == ["c", "d"]
    assert schema.mysql_types["c"] == "bigint"
    assert rows == [(1, "x", None, None) if schema.columns[0] == "id" else ("x", 1, None, None)]
    assert unparsed == []  # the structure made up for the text


def test_a_statement_that_removes_rows_or_renames_is_recorded_even_with_structure(spark):
    """The structure tells the columns after a statement, not rows it removed (a partition
    dropped) or a table it renamed that was not applied (the session's database unknown)."""
    types = {"id": "int"}
    out, unparsed = _apply(spark, [
        _insert(0, TS, {"id": "1"}, types),
        _ddl(1, TS + 10, "ALTER TABLE t TRUNCATE PARTITION p0", types, ["id"]),
        _ddl(2, TS + 20, "RENAME TABLE t TO archive.t_2023", types, ["id"]),
        _ddl(3, TS + 30, "ALTER TABLE t RENAME COLUMN id TO id", types, ["id"]),  # applied: not listed
    ])
    assert out[("db", "t")][1] == [(1,)]
    assert [u["sql"] for u in unparsed] == ["ALTER TABLE t TRUNCATE PARTITION p0", "RENAME TABLE t TO archive.t_2023"]


def test_unparseable_ddl_without_structure_is_recorded(spark):
    out, unparsed = _apply(spark, [
        _insert(0, TS, {"id": "1"}, {"id": "int"}),
        _ddl(1, TS + 10, "ALTER TABLE t TRUNCATE PARTITION p0"),
    ])
    assert out[("db", "t")][1] == [(1,)]
    assert [u["sql"] for u in unparsed] == ["ALTER TABLE t TRUNCATE PARTITION p0"]


def test_an_online_schema_change_copies_alters_and_swaps_the_table_in(spark):
    """gh-ost's sequence: CREATE TABLE _gho LIKE t, ALTER _gho, copy the rows (and the writes
    that go on meanwhile), RENAME t -> _del and _gho -> t, DROP _del."""
    old, new = {"id": "int", "a": "varchar(5)"}, {"id": "int", "a": "varchar(5)", "c": "int"}

    def ddl(offset, table, sql):
        return _event(offset, TS + offset, kind="ddl", table=table, ddl_type="ALTER", ddl_sql=sql)

    def insert(offset, table, values, types):
        return {**_insert(offset, TS + offset, values, types), "table": table}

    events = [
        insert(0, "t", {"id": "1", "a": "x"}, old),
        ddl(1, "_t_gho", "create /* gh-ost */ table `db`.`_t_gho` like `db`.`t`"),
        ddl(2, "_t_gho", "alter /* gh-ost */ table `db`.`_t_gho` add column c int not null default 0"),
        insert(3, "_t_gho", {"id": "1", "a": "x", "c": "0"}, new),  # the copy
        insert(4, "t", {"id": "2", "a": "y"}, old),  # a write meanwhile, and gh-ost applying it
        insert(5, "_t_gho", {"id": "2", "a": "y", "c": "0"}, new),
        ddl(6, "_t_gho", "rename /* gh-ost */ table `db`.`t` to `db`.`_t_del`, `db`.`_t_gho` to `db`.`t`"),
        ddl(7, "_t_del", "drop /* gh-ost */ table if exists `db`.`_t_del`"),
        insert(8, "t", {"id": "3", "a": "z", "c": "7"}, new),
        ddl(9, "t_empty", "CREATE TABLE t_empty LIKE t"),  # no rows: the copy of the table alone
        ddl(10, "t_other", "CREATE TABLE t_other LIKE db.never_seen"),  # columns unknown: recorded
        # ... unless the protocol carries the new table's structure (Debezium's tableChanges)
        {**ddl(11, "t_struct", "CREATE TABLE t_struct LIKE db.never_seen"),
         "column_types": {"id": "int", "z": "int"}, "pk_names": ["id"]},
    ]
    result = apply_window(spark, spark.createDataFrame(events, CHANGE_LOG_SCHEMA), {})
    tables = {n: (st.schema, sorted((r.asDict() for r in st.frame.drop("_cdc_commit_ts").collect()),
                                    key=lambda r: r["id"]) if st.frame is not None else [])
              for n, st in result.tables.items()}
    unparsed = result.unparsed_ddl
    result.release()
    assert set(tables) == {("db", "t"), ("db", "t_empty"), ("db", "t_struct")}
    assert sorted(tables[("db", "t_struct")][0].columns) == ["id", "z"]
    schema, rows = tables[("db", "t")]
    assert (sorted(schema.columns), schema.primary_key, schema.mysql_types["c"]) == (["a", "c", "id"], ["id"], "int")
    assert rows == [{"id": 1, "a": "x", "c": 0}, {"id": 2, "a": "y", "c": 0}, {"id": 3, "a": "z", "c": 7}]
    empty, rows = tables[("db", "t_empty")]
    assert (sorted(empty.columns), empty.primary_key, empty.mysql_types, rows) == (["a", "c", "id"], ["id"], new, [])
    assert [(u["table"], u["error"]) for u in unparsed] == [
        ("db.t_other", "CREATE TABLE ... LIKE db.never_seen: no such table in the snapshot")]


def test_a_row_at_the_same_commit_ts_as_a_ddl_in_another_partition_counts_as_after_it(spark):
    types = {"id": "int", "v": "int"}
    out, _ = _apply(spark, [
        _insert(0, TS, {"id": "1", "v": "1"}, types),
        _ddl(1, TS + 5, "TRUNCATE TABLE t"),
        _insert(7, TS + 5, {"id": "2", "v": "2"}, types, partition=1),  # same ms, other partition: after
        _insert(2, TS + 5, {"id": "3", "v": "3"}, types, partition=0),  # same partition, later offset: after
    ])
    assert out[("db", "t")][1] == [(2, 2), (3, 3)]


def test_a_row_at_the_same_commit_ts_in_another_topic_counts_as_after_the_ddl(spark):
    """Kafka order is only an order within one partition of one topic: a storage-sink row
    stream and its table's DDL stream are both partition 0."""
    types = {"id": "int", "v": "int"}
    out, _ = _apply(spark, [
        _insert(0, TS, {"id": "1", "v": "1"}, types),
        {**_ddl(1 << 40, TS + 5, "TRUNCATE TABLE t"), "topic": "db/t/meta"},
        {**_insert(1 << 24, TS + 5, {"id": "2", "v": "2"}, types), "topic": "db/t/5"},  # smaller offset
    ])
    assert out[("db", "t")][1] == [(2, 2)]


def test_renames_split_from_one_statement_apply_in_an_order_mysql_could_run(spark):
    """`RENAME TABLE a TO c, b TO a, c TO b` (a swap) and gh-ost's cut-over arrive as one rename
    per table at one commit_ts; TiCDC's storage sink loses their order (one file each)."""
    types = {"id": "int"}

    def rename(offset, new, sql):
        return {**_ddl(offset, TS + 10, sql), "table": new, "topic": f"db/{new}/meta"}

    def insert(offset, table, key):
        return {**_insert(offset, TS + offset, {"id": str(key)}, types), "table": table}

    events = [insert(0, "a", 1), insert(1, "b", 2), insert(2, "t", 3), insert(3, "t_gho", 4),
              # given in an order that cannot have run: each target still exists
              rename(0, "b", "RENAME TABLE `db`.`c` TO `db`.`b`"),
              rename(0, "a", "RENAME TABLE `db`.`b` TO `db`.`a`"),
              rename(0, "t", "RENAME TABLE `db`.`t_gho` TO `db`.`t`"),
              rename(0, "c", "RENAME TABLE `db`.`a` TO `db`.`c`"),
              rename(0, "t_del", "RENAME TABLE `db`.`t` TO `db`.`t_del`")]
    out, unparsed = _apply(spark, events)
    assert {n[1]: rows for n, (_, rows) in out.items()} == {"a": [(2,)], "b": [(1,)], "t": [(4,)], "t_del": [(3,)]}
    assert unparsed == []


def _rename(offset: int, new: str, sql: str, topic: str | None = None) -> dict:
    return {**_ddl(offset, TS + 10, sql), "table": new, "topic": topic or f"db/{new}/meta"}


def _row(offset: int, table: str, key: int, ts: int | None = None) -> dict:
    return {**_insert(offset, TS + offset if ts is None else ts, {"id": str(key)}, {"id": "int"}), "table": table}


def test_split_renames_skip_a_name_dropped_before_them(spark):
    out, unparsed = _apply(spark, [
        _row(0, "a", 1), _row(1, "b", 9), _row(2, "q", 2),
        {**_ddl(3, TS + 5, "DROP TABLE b"), "table": "b"},
        _rename(0, "a", "RENAME TABLE `db`.`q` TO `db`.`a`"),  # cannot run first: a still exists
        _rename(0, "b", "RENAME TABLE `db`.`a` TO `db`.`b`"),
    ])
    assert {n[1]: rows for n, (_, rows) in out.items()} == {"a": [(2,)], "b": [(1,)]}
    assert unparsed == []


def test_split_renames_of_a_table_the_snapshot_does_not_know_are_applied_and_reported(spark):
    """A swap with b empty and never seen: b and tmp may each have existed, and a's rows end
    under another name depending on which did. Applied (each a free name in turn), and listed."""
    out, unparsed = _apply(spark, [
        _row(0, "a", 1),
        _rename(0, "a", "RENAME TABLE `db`.`b` TO `db`.`a`"),
        _rename(0, "b", "RENAME TABLE `db`.`tmp` TO `db`.`b`"),
        _rename(0, "tmp", "RENAME TABLE `db`.`a` TO `db`.`tmp`"),
    ])
    assert sum(len(rows) for _, rows in out.values()) == 1
    assert len(unparsed) == 3 and all(u["error"].startswith("applied, in a guessed order") for u in unparsed)


def test_renames_in_one_kafka_partition_keep_kafka_order(spark):
    """Kafka order is known: `RENAME x TO y` then `RENAME z TO x` (x empty and never seen)."""
    out, unparsed = _apply(spark, [
        _row(0, "z", 3),
        _rename(5, "y", "RENAME TABLE `db`.`x` TO `db`.`y`", topic="cdc"),
        _rename(6, "x", "RENAME TABLE `db`.`z` TO `db`.`x`", topic="cdc"),
    ])
    assert {n[1]: rows for n, (_, rows) in out.items()} == {"x": [(3,)]}
    assert unparsed == []


def test_a_rename_onto_a_table_the_snapshot_has_is_reported_not_applied(spark):
    out, unparsed = _apply(spark, [
        _row(0, "a", 1), _row(1, "b", 2),
        {**_ddl(2, TS + 5, "RENAME TABLE a TO b"), "table": "b"},
    ])
    assert {n[1]: rows for n, (_, rows) in out.items()} == {"a": [(1,)], "b": [(2,)]}
    assert [u["error"] for u in unparsed] == ["RENAME TABLE to db.b: that table exists in the snapshot"]


def test_rows_of_a_binlog_batch_keep_kafka_order_at_one_position(spark):
    """Official Canal: a batch shares its `es` second and its id (the source position). An
    INSERT after a TRUNCATE of that batch survives it; a DELETE after an INSERT of one key
    leaves it deleted (TiCDC's DELETE-first tie is for one transaction's net changes only)."""
    types = {"id": "int"}
    out, _ = _apply(spark, [
        _insert(0, TS, {"id": "1"}, types) | {"source_position": 5},
        _ddl(1, TS, "TRUNCATE TABLE t") | {"source_position": 5},
        _insert(2, TS, {"id": "2"}, types) | {"source_position": 5},
        _insert(3, TS, {"id": "3"}, types) | {"source_position": 5},
        _event(4, TS, op="DELETE", pk_names=["id"], pk_values=["3"], before={"id": "3"}, column_types=types,
               source_position=5),
    ])
    assert out[("db", "t")][1] == [(2,)]


def test_a_binlog_batch_across_partitions(spark):
    """Official Canal hashing rows by key: the DDL goes to partition 0, the rows elsewhere. A
    batch's rows count as before its DDL (a DROP leaves them dropped), and a key-changing
    UPDATE's old-key DELETE, sent with the new key, frees the key before the next row takes it
    (`UPDATE t SET id = id + 1 ORDER BY id DESC` over ids 2 and 3)."""
    types = {"id": "int", "v": "int"}
    at = {"source_position": 5}

    def move(offset, partition, old, new):
        return _event(offset, TS, partition=partition, op="UPDATE", pk_names=["id"], pk_values=[new],
                      before={"id": old, "v": old}, after={"id": new, "v": old}, column_types=types) | at

    out, _ = _apply(spark, [
        _insert(0, TS - 10, {"id": "2", "v": "2"}, types), _insert(1, TS - 10, {"id": "3", "v": "3"}, types),
        move(0, 1, "3", "4"), move(2, 0, "2", "3"),
    ])
    assert out[("db", "t")][1] == [(3, 2), (4, 3)]

    out, _ = _apply(spark, [
        _insert(0, TS, {"id": "1", "v": "1"}, types, partition=1) | at,
        _ddl(0, TS, "DROP TABLE t") | at,
    ])
    assert ("db", "t") not in out


def test_without_a_position_a_delete_still_applies_before_an_insert_at_one_commit_ts(spark):
    types = {"id": "int", "a": "varchar(5)"}
    out, _ = _apply(spark, [
        _insert(0, TS, {"id": "1", "a": "new"}, types),
        _event(1, TS, op="DELETE", pk_names=["id"], pk_values=["1"], before={"id": "1", "a": "old"},
               column_types=types),
    ])
    assert out[("db", "t")][1] == [(1, "new")]


def test_a_snapshots_rows_come_after_its_schema_whatever_their_clocks(spark):
    """Debezium's initial snapshot writes DROP / CREATE of each table at the snapshot's binlog
    position, stamped with the connector's clock; its rows (op READ, the same position) carry
    the database's clock, often earlier. A streamed DROP at that position still drops them."""
    types = {"id": "int"}
    snapshot_ddl = {"op": "READ", "source_position": 157}
    read = lambda offset, i: _insert(offset, TS, {"id": i}, types) | {"op": "READ", "source_position": 157}  # noqa: E731
    out, _ = _apply(spark, [
        _ddl(0, TS + 750, "DROP TABLE IF EXISTS t") | snapshot_ddl,
        _ddl(1, TS + 755, "CREATE TABLE t (id INT PRIMARY KEY)") | snapshot_ddl,
        read(2, "1"), read(3, "2"),
    ])
    assert out[("db", "t")][1] == [(1,), (2,)]

    # A change streamed after the snapshot's position, stamped in whole seconds before the
    # schema's milliseconds, still applies after it.
    streamed = _event(4, TS, op="UPDATE", pk_names=["id"], pk_values=["2"], before={"id": "2"},
                      after={"id": "2"}, column_types=types, source_position=200)
    out, _ = _apply(spark, [
        _ddl(0, TS + 750, "DROP TABLE IF EXISTS t") | snapshot_ddl,
        _ddl(1, TS + 755, "CREATE TABLE t (id INT PRIMARY KEY)") | snapshot_ddl,
        read(2, "1"), streamed,
    ])
    assert out[("db", "t")][1] == [(1,), (2,)]

    out, _ = _apply(spark, [
        _ddl(0, TS + 750, "CREATE TABLE t (id INT PRIMARY KEY)") | snapshot_ddl,
        read(1, "1"),
        _ddl(2, TS + 900, "DROP TABLE t") | {"source_position": 157},  # streamed: not from the snapshot
    ])
    assert ("db", "t") not in out


def test_a_decimal_that_grows_in_integer_digits_merges_only_its_touched_keys(spark):
    """TiCDC's default Canal-JSON types a decimal as `decimal` (no parameters): its integer
    digits are learned from each window's values, but the stored type stays decimal(38, scale).
    A window whose values have more digits changes no stored value, so it merges the keys it
    touches instead of rewriting the table whole; a larger scale does change the type."""
    types = {"id": "int", "amount": "decimal"}
    first = apply_window(spark, spark.createDataFrame(
        [_insert(i, TS + i, {"id": str(i), "amount": "1.50"}, types) for i in range(3)], CHANGE_LOG_SCHEMA), {})
    name = ("db", "t")
    before = first.tables[name]
    rows = spark.createDataFrame(before.frame.collect(), before.frame.schema)
    first.release()
    assert (before.schema.decimal_scales, before.schema.decimal_integer_digits) == ({"amount": 2}, {"amount": 1})

    def second(amount: str):
        grown = _event(10, TS + 10, op="UPDATE", pk_names=["id"], pk_values=["1"], column_types=types,
                       before={"id": "1", "amount": "1.50"}, after={"id": "1", "amount": amount})
        previous = {name: TableState(before.schema, rows, previous_rows=3)}  # a window's states are its own
        return apply_window(spark, spark.createDataFrame([grown], CHANGE_LOG_SCHEMA), previous, touched_keys_only=True)

    digits = second("12345.67")
    state = digits.tables[name]
    assert state.schema.decimal_integer_digits == {"amount": 5} and state.schema != before.schema
    assert state.merge_source is not None  # the touched key only
    assert [(r.id, r.amount) for r in state.frame.collect()] == [(1, Decimal("12345.67"))]
    digits.release()
    scale = second("2.125")
    assert scale.tables[name].schema.decimal_scales == {"amount": 3}
    assert scale.tables[name].merge_source is None  # decimal(38,2) -> (38,3): the table is rewritten whole
    assert sorted((r.id, r.amount) for r in scale.tables[name].frame.collect()) == [
        (0, Decimal("1.500")), (1, Decimal("2.125")), (2, Decimal("1.500"))]
    scale.release()


def test_stores_as_compares_what_reaches_a_stored_value():
    base = TableSchema("db", "t", ["id", "amount", "note"], {"id": "int", "amount": "decimal", "note": "varchar(5)"},
                       ["id"], {"amount": 2}, {"amount": 3})
    assert stores_as(replace(base, decimal_integer_digits={"amount": 9}), base)
    assert stores_as(replace(base, mysql_types={**base.mysql_types, "note": "text"}), base)
    assert not stores_as(replace(base, decimal_scales={"amount": 3}), base)
    assert not stores_as(replace(base, decimal_integer_digits={"amount": 37}), base)  # 39 digits: text
    assert not stores_as(replace(base, primary_key=["id", "note"]), base)
    assert not stores_as(replace(base, columns=["id", "note", "amount"]), base)

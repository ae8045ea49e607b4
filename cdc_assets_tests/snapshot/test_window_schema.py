"""Schema inference over a window's row events grouped into shapes (snapshot/window_schema.py)."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.helpers import raw_frame

T0 = 1767225600000 << 18


def _msg(table: str, op: str, ts: int, data: dict, types: dict, pk: list[str]) -> bytes:
    return json.dumps({
        "id": 0, "database": "db", "table": table, "pkNames": pk, "isDdl": False, "type": op,
        "es": ts >> 18, "ts": ts >> 18, "sql": "", "sqlType": {}, "mysqlType": types,
        "data": [data], "old": None, "_tidb": {"commitTs": ts},
    }).encode()


def _schemas(spark, msgs):
    decoded = get_decoder("canal-json").decode(raw_frame(spark, msgs))
    return window_table_schemas(decoded.where(F.col("_reject_reason").isNull()))


def test_many_rows_of_few_shapes_give_each_tables_columns_types_and_newest_key(spark):
    narrow = {"id": "int", "name": "varchar(8)"}
    wide = {"id": "int", "name": "varchar(20)", "price": "decimal", "note": "text"}
    msgs = [
        # Shape 1, many rows: the newer shape's later columns come after these.
        *[_msg("t", "INSERT", T0 + 10 + i, {"id": str(i), "name": "n"}, narrow, ["id"]) for i in range(20)],
        # Shape 2: new columns, wider types, a decimal without parameters.
        _msg("t", "INSERT", T0 + 50, {"id": "100", "name": "w", "price": "12.345", "note": "x"}, wide, ["id"]),
        _msg("t", "INSERT", T0 + 51, {"id": "101", "name": "w", "price": "-0001234.5", "note": None}, wide,
             ["id"]),
        # Shape 3, the newest event: another key, the same columns as shape 1.
        _msg("t", "UPDATE", T0 + 60, {"id": "1", "name": "z"}, narrow, ["name"]),
        # Another table in the same window, its own shape.
        _msg("u", "INSERT", T0 + 5, {"k": "a", "v": "1.5"}, {"k": "char(1)", "v": "decimal(4,1)"}, ["k"]),
    ]
    schemas = _schemas(spark, msgs)
    t, u = schemas[("db", "t")], schemas[("db", "u")]

    assert t.columns == ["id", "name", "price", "note"]
    # Where each column first appeared (a schema grown by images is recorded at that commit_ts).
    assert t.first_commit_ts == {"id": T0 + 10, "name": T0 + 10, "price": T0 + 50, "note": T0 + 50}
    # Newest non-null type per column: name's newest type comes from shape 3 (T0 + 60).
    assert t.mysql_types == {"id": "int", "name": "varchar(8)", "price": "decimal", "note": "text"}
    assert t.primary_key == ["name"]
    assert (t.decimal_scales, t.decimal_integer_digits) == ({"price": 3}, {"price": 4})

    assert (u.columns, u.primary_key, u.mysql_types) == (["k", "v"], ["k"], {"k": "char(1)", "v": "decimal(4,1)"})
    assert (u.decimal_scales, u.decimal_integer_digits) == ({}, {})
    # Each table's row events, every shape counted once (the writes choose their path by it).
    assert (t.events, u.events) == (23, 1)


def test_decimal_digits_come_only_from_rows_that_type_the_column_without_parameters(spark):
    msgs = [
        # Typed with parameters: its digits must not count.
        _msg("t", "INSERT", T0 + 1, {"id": "1", "amount": "123456.12345"}, {"id": "int", "amount": "decimal(12,5)"},
             ["id"]),
        _msg("t", "INSERT", T0 + 2, {"id": "2", "amount": "7.5"}, {"id": "int", "amount": "DECIMAL UNSIGNED"}, ["id"]),
    ]
    (s,) = _schemas(spark, msgs).values()
    assert s.mysql_types["amount"] == "DECIMAL UNSIGNED"
    assert (s.decimal_scales, s.decimal_integer_digits) == ({"amount": 1}, {"amount": 1})


def test_several_windows_by_one_action_give_each_window_its_own_schemas_and_ddl(spark):
    """The range runs' pre-pass (`schemas_and_rows_by`): per window exactly what that window's
    own pre-pass finds, its DDL rows included, in one Spark action (two with decimals
    without parameters)."""
    from cdc_assets.common.spark_session import jobs_since, spark_job_ids
    from cdc_assets.snapshot.ddl.barriers import ddl_rows
    from cdc_assets.snapshot.window_schema import schemas_and_rows, schemas_and_rows_by

    hour = 3_600_000 << 18
    ddl = json.dumps({"id": 0, "database": "db", "table": "t", "pkNames": None, "isDdl": True, "type": "ALTER",
                      "es": (T0 + hour + 7) >> 18, "ts": 0, "sql": "ALTER TABLE t ADD COLUMN c INT", "sqlType": None,
                      "mysqlType": None, "data": None, "old": None, "_tidb": {"commitTs": T0 + hour + 7}}).encode()
    windows = {
        1: [_msg("t", "INSERT", T0 + 1, {"id": "1", "p": "1.25"}, {"id": "int", "p": "decimal"}, ["id"]),
            _msg("u", "INSERT", T0 + 2, {"k": "a"}, {"k": "char(1)"}, ["k"])],
        # The same table, another shape and key, larger decimal digits, and a DDL event.
        2: [_msg("t", "INSERT", T0 + hour + 3, {"id": "2", "p": "-123.5", "n": "x"},
                 {"id": "bigint", "p": "decimal", "n": "text"}, ["n"]), ddl],
        3: [ddl],  # DDL alone: no schemas, its DDL row
    }
    decoder = get_decoder("canal-json")
    frames = {w: decoder.decode(raw_frame(spark, msgs)).where(F.col("_reject_reason").isNull())
              for w, msgs in windows.items()}
    changes = None
    for w, frame in frames.items():
        tagged = frame.withColumn("window_start_ms", F.lit(w).cast("long"))
        changes = tagged if changes is None else changes.unionByName(tagged)
    changes = changes.persist()
    changes.count()

    before = spark_job_ids()
    found = schemas_and_rows_by(changes.where(F.col("event_kind") == "row"), ddl_rows(changes, "window_start_ms"),
                                "window_start_ms")
    assert jobs_since(before) <= 2 * 6  # two actions (the decimals' digits), each a few of AQE's stages

    for w, frame in frames.items():
        schemas, ddl_found = schemas_and_rows(frame, ddl_rows(frame))
        by_window, ddl_by_window = found[w]
        assert by_window == schemas
        assert [s.first_commit_ts for s in by_window.values()] == [s.first_commit_ts for s in schemas.values()]
        assert [s.events for s in by_window.values()] == [s.events for s in schemas.values()]
        assert [r.ddl_sql for r in ddl_by_window] == [r.ddl_sql for r in ddl_found]
    assert found[2][0][("db", "t")].primary_key == ["n"]
    assert [found[1][0][n].events for n in [("db", "t"), ("db", "u")]] + [found[2][0][("db", "t")].events] == [1, 1, 1]
    assert (found[2][0][("db", "t")].decimal_scales, found[1][0][("db", "t")].decimal_scales) == ({"p": 1}, {"p": 2})
    assert found[3] == ({}, [found[3][1][0]]) and found[3][1][0].ddl_sql == "ALTER TABLE t ADD COLUMN c INT"
    changes.unpersist()


def _fields(s) -> tuple:
    return (s.columns, s.mysql_types, s.primary_key, s.decimal_scales, s.decimal_integer_digits,
            s.first_commit_ts, s.events)


def test_parts_of_a_window_combine_into_the_schema_of_their_rows(spark):
    """A window with DDL (snapshot/timeline.py): its segments' schemas come from one job
    (`schemas_by`), and a flush of consecutive segments `combined`s them; it must equal the
    schema of the segments' rows themselves (`window_table_schemas`), for every range."""
    from cdc_assets.snapshot.window_schema import combined, schemas_by

    plain = {"id": "int", "amount": "decimal"}
    declared = {"id": "int", "amount": "decimal(12,2)"}
    grown = {"id": "int", "amount": "decimal", "note": "text"}
    msgs = [
        # part 0: a decimal without parameters; table u only here
        _msg("t", "INSERT", T0 + 1, {"id": "1", "amount": "12.5"}, plain, ["id"]),
        _msg("u", "INSERT", T0 + 2, {"k": "a"}, {"k": "char(1)"}, ["k"]),
        # part 1: the decimal declared (its digits no longer learned), then a new key
        _msg("t", "INSERT", T0 + 100, {"id": "2", "amount": "123456.25"}, declared, ["id"]),
        _msg("t", "UPDATE", T0 + 101, {"id": "2", "amount": "1.00"}, declared, ["amount"]),
        # part 2: t absent
        _msg("u", "UPDATE", T0 + 200, {"k": "b"}, {"k": "char(1)"}, ["k"]),
        # part 3: without parameters again, more digits and a column the images add
        _msg("t", "INSERT", T0 + 300, {"id": "3", "amount": "-9876.125", "note": "n"}, grown, ["id"]),
        _msg("t", "INSERT", T0 + 301, {"id": "4", "amount": "5", "note": None}, grown, ["id"]),
    ]
    decoded = get_decoder("canal-json").decode(raw_frame(spark, msgs)).where(F.col("_reject_reason").isNull())
    parts = decoded.withColumn("part", F.floor((F.col("commit_ts") - F.lit(T0)) / 100).cast("int"))
    by_part = schemas_by(parts, "part")
    assert {p: sorted(found) for p, found in by_part.items()} == {
        0: [("db", "t"), ("db", "u")], 1: [("db", "t")], 2: [("db", "u")], 3: [("db", "t")]}
    for name in (("db", "t"), ("db", "u")):
        for start in range(4):
            for upto in range(start, 4):
                mine = [by_part[p][name] for p in range(start, upto + 1) if name in by_part[p]]
                if not mine:
                    continue
                rows = parts.where(F.col("part").between(start, upto))
                assert _fields(combined(mine)) == _fields(window_table_schemas(rows)[name]), (name, start, upto)
    whole = combined([by_part[p][("db", "t")] for p in (0, 1, 3)])
    assert whole.columns == ["id", "amount", "note"] and whole.primary_key == ["id"]
    assert (whole.decimal_scales, whole.decimal_integer_digits) == ({"amount": 3}, {"amount": 4})

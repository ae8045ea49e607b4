"""The schema of every table a window touched, inferred from its row events.

Columns: the union of the row events' image columns, by first appearance in commit order
(`TableSchema.first_commit_ts`: the commit_ts of that appearance).
Types: each column's newest non-null type. Primary key: the newest event's. For decimals
declared without parameters, the largest scale and integer part seen in `after` values
(see `mysql_types`). Events: the table's row events in the window (`TableSchema.events`:
the writes choose their path by it before anything runs).

Cost. The rows of one table nearly always share their column names and types, so the rows
are first grouped into shapes (table, column names, column types): the per-column work
then runs over a handful of shapes instead of every cell of the window. Values are read
only for the columns that some row types as a decimal without parameters.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, functions as F, types as T

from cdc_assets.common.mysql_types import is_decimal_without_params, parse_mysql_type
from cdc_assets.common.sql_text import ident
from cdc_assets.contracts.schemas import ROW
from cdc_assets.snapshot.reconstruct import TableSchema

_PARAMLESS_DECIMAL = r"^\s*(decimal|numeric|dec|fixed)(\s+(signed|unsigned|zerofill))*\s*$"

Name = tuple[str, str]


def _is_paramless_decimal(mtype: Column) -> Column:
    return mtype.isNotNull() & F.lower(mtype).rlike(_PARAMLESS_DECIMAL)


def _commit_order() -> Column:
    return F.struct("commit_ts", "source_position", "kafka_partition", "kafka_offset", "event_index")


def _shapes(rows: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """One row per (`by`, table, column names, column types): first and last event, newest key,
    and its events.

    Rows are grouped on the images' key arrays and the types' entries as they come (maps
    cannot be grouped on; their key and entry arrays can): merging and sorting them per
    row cost more than the grouping. The few groups are merged afterwards; a shape that
    lists the same columns in another order is just one more group."""
    no_keys = F.array().cast("array<string>")
    order = _commit_order()
    return rows.groupBy(
        *by, "database", "table", F.map_keys("after").alias("after_names"), F.map_keys("before").alias("before_names"),
        F.map_entries("column_types").alias("types"),
    ).agg(F.min(order).alias("first_o"), F.max(order).alias("last_o"), F.max_by("pk_names", order).alias("pk"),
          F.count(F.lit(1)).alias("events")
          ).select(
        *by, "database", "table", "types", "first_o", "last_o", "pk", "events",
        F.array_union(F.coalesce("after_names", no_keys), F.coalesce("before_names", no_keys)).alias("names"),
    )


def _columns(shapes: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """One row per (`by`, table, column): where it first appears, its newest type and key, its
    place, and the table's row events in the window (each shape's counted once: at its first name)."""
    cells = shapes.select(
        *by, "database", "table", "first_o", "last_o", "pk", "events", F.map_from_entries("types").alias("types"),
        F.posexplode("names").alias("_pos", "col"),
    )
    mtype = F.try_element_at("types", F.col("col"))
    per_table = Window.partitionBy(*by, "database", "table")
    # Clustered by table, the shapes feed both the per-column grouping and the per-table window
    # with one exchange (each exchange is a Spark job of its own under AQE).
    return cells.repartition(*by, "database", "table").groupBy(*by, "database", "table", "col").agg(
        F.min(F.struct("first_o", "_pos")).alias("first_seen"),
        F.max("last_o").alias("last_seen"),
        F.max_by("pk", "last_o").alias("pk"),
        F.max_by(mtype, F.when(mtype.isNotNull(), F.col("last_o"))).alias("mysql_type"),
        F.max(_is_paramless_decimal(mtype)).alias("paramless_decimal"),
        F.sum(F.when(F.col("_pos") == 0, F.col("events"))).alias("shape_events"),
    ).select(
        "*",
        F.row_number().over(per_table.orderBy("first_seen")).alias("position"),
        (F.col("last_seen") == F.max("last_seen").over(per_table)).alias("newest"),
        F.sum("shape_events").over(per_table).alias("table_events"),
    ).drop("last_seen", "shape_events")


def _decimal_digits(rows: DataFrame, columns: list[str], by: tuple[str, ...] = ()) -> dict[tuple, tuple[int, int]]:
    """(`by`..., database, table, column) -> (largest scale, largest integer part) of the
    values of rows that type the column as a decimal without parameters."""
    cells = rows.select(
        *by, "database", "table", "after", "column_types", F.explode(F.array(*[F.lit(c) for c in columns])).alias("col")
    )
    value = F.try_element_at("after", F.col("col"))
    inferred = _is_paramless_decimal(F.try_element_at("column_types", F.col("col"))) & value.isNotNull()
    scale = F.when(value.contains("."), F.length(F.regexp_extract(value, r"\.(\d*)", 1))).otherwise(0)
    integer_digits = F.length(F.regexp_extract(value, r"^\s*[+-]?0*(\d*)", 1))
    found = cells.where(inferred).groupBy(*by, "database", "table", "col").agg(
        F.max(scale).alias("scale"), F.max(integer_digits).alias("integer_digits")
    ).collect()
    return {(*[r[c] for c in by], r.database, r.table, r.col): (int(r.scale), int(r.integer_digits)) for r in found}


def window_table_schemas(changes: DataFrame) -> dict[Name, TableSchema]:
    """Schema of every table touched in the window (one Spark action, two with such decimals)."""
    return schemas_and_rows(changes)[0]


def schemas_and_rows(changes: DataFrame, other: DataFrame | None = None) -> tuple[dict[Name, TableSchema], list]:
    """`window_table_schemas`, and the rows of `other` collected by the same Spark action (the
    window's DDL events: `ddl.barriers.ddl_rows`)."""
    rows = changes.where(F.col("event_kind") == ROW)
    per_column, other_rows = _collect_with(_columns(_shapes(rows)), other)
    return _schemas(per_column, rows, ()).get((), {}), other_rows


def schemas_and_rows_by(rows: DataFrame, other: DataFrame | None, column: str) -> dict:
    """`schemas_and_rows` of several windows by one Spark action: `rows` (row events) and
    `other` (if any) both carry `column`, the window; value -> (that window's schemas, its rows
    of `other`). A window with neither has no entry."""
    by = (column,)
    per_column, other_rows = _collect_with(_columns(_shapes(rows, by), by), other)
    out = {w: (schemas, []) for (w,), schemas in _schemas(per_column, rows, by).items()}
    for r in other_rows:
        out.setdefault(r[column], ({}, []))[1].append(r)
    return out


def schemas_by(rows: DataFrame, column: str) -> dict:
    """`window_table_schemas` of each part of a window (the parts: the values of `column`, say
    its DDL segments) by one Spark action, two with decimals without parameters: value -> that
    part's schemas. A part without row events has no entry."""
    found = schemas_and_rows_by(rows.where(F.col("event_kind") == ROW), None, column)
    return {value: schemas for value, (schemas, _) in found.items()}


def combined(parts: list[TableSchema]) -> TableSchema:
    """The schema `window_table_schemas` infers from the rows of several parts of a window, from
    each part's schema (no Spark job). `parts`: one table's, in commit order (every row of a
    part commits before those of the next, as a window's DDL segments do). Columns by first
    appearance, each column's newest type, the newest key, the largest decimal digits of the
    columns whose newest type has no parameters, the events of all parts."""
    out = TableSchema(parts[0].database, parts[0].table, [], {}, [], {}, {}, {}, 0)
    for part in parts:
        out.columns += [c for c in part.columns if c not in out.columns]
        out.mysql_types.update(part.mysql_types)
        out.primary_key = list(part.primary_key)
        for mine, theirs in ((out.decimal_scales, part.decimal_scales),
                             (out.decimal_integer_digits, part.decimal_integer_digits)):
            mine.update({c: max(n, mine.get(c, 0)) for c, n in theirs.items()})
        out.first_commit_ts.update({c: min(ts, out.first_commit_ts.get(c, ts)) for c, ts in part.first_commit_ts.items()})
        out.events += part.events or 0
    inferred = {c for c, t in out.mysql_types.items() if is_decimal_without_params(parse_mysql_type(t))}
    out.decimal_scales = {c: n for c, n in out.decimal_scales.items() if c in inferred}
    out.decimal_integer_digits = {c: n for c, n in out.decimal_integer_digits.items() if c in inferred}
    return out


def _schemas(per_column: list, rows: DataFrame, by: tuple[str, ...]) -> dict[tuple, dict[Name, TableSchema]]:
    """The collected columns as each group's (the `by` values) table schemas; the digits of
    decimals without parameters by one more action, only when some column has them."""
    paramless = sorted({r.col for r in per_column if r.paramless_decimal})
    digits = _decimal_digits(rows, paramless, by) if paramless else {}

    groups: dict[tuple, dict[Name, TableSchema]] = {}
    for r in sorted(per_column, key=lambda r: (*[r[c] for c in by], r.database, r.table, r.position)):
        group = tuple(r[c] for c in by)
        schemas = groups.setdefault(group, {})
        s = schemas.setdefault((r.database, r.table), TableSchema(r.database, r.table, [], {}, []))
        s.columns.append(r.col)
        s.first_commit_ts[r.col] = r.first_seen.first_o.commit_ts
        if r.mysql_type is not None:
            s.mysql_types[r.col] = r.mysql_type
        found = digits.get((*group, r.database, r.table, r.col))
        if found is not None and is_decimal_without_params(parse_mysql_type(r.mysql_type)):
            s.decimal_scales[r.col], s.decimal_integer_digits[r.col] = found
        if r.newest:
            s.primary_key = list(r.pk or [])
        s.events = int(r.table_events or 0)
    return groups


def _collect_with(frame: DataFrame, other: DataFrame | None) -> tuple[list, list]:
    """The rows of both frames, collected by one action: each side as a struct column of a
    union, null on the other side's rows."""
    if other is None:
        return frame.collect(), []
    mine, theirs = T.StructType(frame.schema.fields), T.StructType(other.schema.fields)
    both = frame.select(F.struct(*[F.col(ident(c)) for c in frame.columns]).alias("a"),
                        F.lit(None).cast(theirs).alias("b")).unionByName(
        other.select(F.lit(None).cast(mine).alias("a"),
                     F.struct(*[F.col(ident(c)) for c in other.columns]).alias("b"))).collect()
    return [r.a for r in both if r.a is not None], [r.b for r in both if r.b is not None]

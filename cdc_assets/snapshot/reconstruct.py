"""Layer 4: each table's state at a window end = previous window's state + this window's changes.

Per primary key the latest change wins, ordered by (commit_ts, source position, action
order, Kafka partition, offset, index). At the same key and commit_ts a DELETE applies before
an INSERT for TiCDC (no position: a primary-key-changing update arrives as DELETE old key +
INSERT new key in one transaction); a binlog source's events keep Kafka order, but for the
old key's DELETE of a key-changing UPDATE (`_oldest_first`). An UPDATE whose before image
has another key also deletes the old key.
Deleted keys disappear. Tables without changes are carried over by reference.

Keys. `reconstruct_table` types each action's key BY NAME against the table's current
primary key (`schema.primary_key`, from the newest event): an action whose pk_names lack
a current key column, or whose key value does not convert, is skipped and counted in
`conversion_failures` (it can neither delete nor overwrite a row it does not identify).
The latest action per typed key wins, whatever pk_names named it (`typed_actions`, one sort
per table, which the history reads too); a key that does not type counts once per
(pk_names, key).

Schema. A window's columns are the union over its row events (first appearance in commit
order); each column's type is its newest non-null type. The previous snapshot is re-typed
with `try_cast`; values that were non-null and become null are counted in
`conversion_failures`. Decimals without declared parameters: see `mysql_types` (Decimal(38,
largest scale seen), or StringType once the largest integer part + that scale exceed 38).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.common.iceberg_tables import MERGE_PRESENT
from cdc_assets.common.mysql_types import parse_mysql_type, spark_type, typed_value, typed_value_sql
from cdc_assets.common.names import table_id
from cdc_assets.common.observed import ObservedMetrics, observed
from cdc_assets.common.sql_text import ident, string, strings
from cdc_assets.contracts.schemas import DELETE, ROW, UPDATE

COMMIT_TS_COLUMN = "_cdc_commit_ts"
# A history version's columns after the table's (snapshot/history.py): the commit TSOs it was
# valid between, and the operation that ended it.
VALID_FROM, VALID_TO, END_OP = "_cdc_valid_from", "_cdc_valid_to", "_cdc_end_op"
_UPSERT, _DELETE = "upsert", "delete"
_PRESENT = "_cdc_values_present"  # _typed_values' count of present values (not MERGE_PRESENT), dropped by it


@dataclass
class TableSchema:
    database: str
    table: str
    columns: list[str]
    mysql_types: dict[str, str]
    primary_key: list[str]
    decimal_scales: dict[str, int] = field(default_factory=dict)
    # Largest integer part (digits) seen per decimal column declared without parameters.
    decimal_integer_digits: dict[str, int] = field(default_factory=dict)
    # Inferred from row images (`window_schema`): the commit_ts of the first event whose image
    # carried each column. Only this window's: neither stored nor compared.
    first_commit_ts: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    # This window's row events of the table (`window_schema`), known before any job reads its
    # rows: the size its writes expect (each event is one or two key actions).
    events: int | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return table_id(self.database, self.table)

    def spark_type_of(self, column: str) -> T.DataType:
        return spark_type(parse_mysql_type(self.mysql_types.get(column)), self.decimal_scales.get(column, 0),
                          self.decimal_integer_digits.get(column, 0))

    def spark_schema(self) -> T.StructType:
        fields = [T.StructField(c, self.spark_type_of(c), True) for c in self.columns]
        return T.StructType(fields + [T.StructField(COMMIT_TS_COLUMN, T.LongType(), True)])

    def to_json(self) -> dict:
        return {
            "database": self.database, "table": self.table, "columns": self.columns,
            "mysql_types": self.mysql_types, "primary_key": self.primary_key,
            "decimal_scales": self.decimal_scales, "decimal_integer_digits": self.decimal_integer_digits,
        }

    @classmethod
    def from_json(cls, d: dict) -> "TableSchema":
        return cls(d["database"], d["table"], list(d["columns"]), dict(d["mysql_types"]),
                   list(d["primary_key"]), dict(d.get("decimal_scales") or {}),
                   dict(d.get("decimal_integer_digits") or {}))

    def merged_with(self, newer: "TableSchema") -> "TableSchema":
        """Columns keep their order; new ones are appended; the newest type wins."""
        columns = self.columns + [c for c in newer.columns if c not in self.columns]
        def widest(old: dict[str, int], new: dict[str, int]) -> dict[str, int]:
            return {**old, **{c: max(v, old.get(c, 0)) for c, v in new.items()}}

        return TableSchema(self.database, self.table, columns,
                           {**self.mysql_types, **newer.mysql_types},
                           newer.primary_key or self.primary_key,
                           widest(self.decimal_scales, newer.decimal_scales),
                           widest(self.decimal_integer_digits, newer.decimal_integer_digits),
                           dict(newer.first_commit_ts), newer.events)

    def added_by(self, newer: "TableSchema") -> list[str]:
        """The columns `merged_with(newer)` appends: the row images carry them, no DDL added them."""
        return [c for c in newer.columns if c not in self.columns]


@dataclass
class TableResult:
    schema: TableSchema
    frame: DataFrame
    previous_rows: int
    inserted_keys: int
    deleted_keys: int
    conversion_failures: int
    # Set by `merge_source`: the frame to MERGE (one row per touched key), whose counts the
    # observer holds once it is written; the three counts above are then 0.
    merge_source: DataFrame | None = None
    observed: ObservedMetrics | None = None


# At one commit_ts, TiCDC's events (no source position) are one transaction's net changes:
# a key's DELETE applies before its INSERT (a split update), whatever their partitions.
# A binlog source's events (a position) can share one (commit_ts, position) over several
# transactions (Canal: `es` in seconds, one id per batch). A key's own events are in its
# partition, in Kafka order: an INSERT then a DELETE of it in one second leaves it deleted.
# Only the old key's DELETE of a key-changing UPDATE travels with the new key, maybe in
# another partition: it still comes first (a key is freed before it is taken again).
_TIE = f"coalesce(CASE WHEN source_position IS NULL OR op = {string(UPDATE)} THEN `order` END, 1)"


def _oldest_first() -> str:
    """The ORDER BY of a key's actions, oldest first (SQL text, common/sql_text)."""
    return (f"commit_ts ASC, source_position ASC NULLS FIRST, {_TIE} ASC, "
            "kafka_partition ASC, kafka_offset ASC, event_index ASC, `order` ASC")


def key_actions(changes: DataFrame) -> DataFrame:
    """Every key action of the row events, untyped (`typed_actions` finds the latest per key)."""
    rows = changes.where(f"event_kind = {string(ROW)}")
    no_values = "CAST(NULL AS MAP<STRING, STRING>)"

    def action(kind: str, key: str, order: int, values: str) -> str:
        return f"named_struct('kind', {string(kind)}, 'key', {key}, 'order', {order}, 'values', {values})"

    before_pk = "transform(pk_names, n -> try_element_at(`before`, n))"
    acts = (
        f"CASE WHEN op = {string(DELETE)} THEN array({action(_DELETE, 'pk_values', 0, no_values)}) "
        f"WHEN op = {string(UPDATE)} AND `before` IS NOT NULL AND {before_pk} != pk_values "
        f"THEN array({action(_DELETE, before_pk, 0, no_values)}, {action(_UPSERT, 'pk_values', 1, '`after`')}) "
        f"ELSE array({action(_UPSERT, 'pk_values', 1, '`after`')}) END"
    )
    carried = ["`database`", "`table`", "pk_names", "op", "commit_ts", "source_position", "kafka_partition",
               "kafka_offset", "event_index"]
    return rows.selectExpr(*carried, f"explode({acts}) AS a").selectExpr(
        *carried, "a.kind AS kind", "a.key AS `key`", "a.order AS `order`", "a.values AS `values`")


def key_column(i: int) -> str:
    """`typed_actions`: the i-th current key column, typed."""
    return f"_cdc_k{i}"


def value_column(i: int) -> str:
    """`typed_actions`: the i-th table column's value, typed."""
    return f"_cdc_v{i}"


# The columns every typed action carries, and those its place among its key's actions adds.
_CARRIED = ("pk_names", "`key`", "op", "commit_ts", "source_position", "`order`", "kafka_partition", "kafka_offset",
            "event_index")
_ORDERED = ("_cdc_key_ok", "_cdc_first", "_cdc_next_ts", "_cdc_next_op", "_cdc_keep")
# A key that does not type is identified by its text: its actions are one partition.
_UNIDENTIFIED = "CASE WHEN NOT _cdc_key_ok THEN struct(pk_names, `key`) END"
# `typed_actions` without its sort (`unsorted_typed_actions`): the partition and the order
# (`_oldest_first`'s, column by column) as columns.
UNIDENTIFIED_COLUMN, TIE_COLUMN = "_cdc_unidentified", "_cdc_tie"
ORDER_COLUMNS = ("commit_ts", "source_position", TIE_COLUMN, "kafka_partition", "kafka_offset", "event_index",
                 "order")


def typed_actions(actions: DataFrame, schema: TableSchema) -> DataFrame:
    """The table's actions (`key_actions`) with the current key and the values typed, and each
    action's place among its typed key's actions in commit order: `_cdc_keep` (the latest:
    it decides the key's row), `_cdc_first`, and the next action's `_cdc_next_ts` and
    `_cdc_next_op` (where the history's versions end). An action whose key does not type has
    `_cdc_key_ok` false and none of these.

    Built as SQL text (common/sql_text): a few py4j calls per table instead of hundreds."""
    pk = schema.primary_key
    key_names = [key_column(i) for i in range(len(pk))]
    acts = _keyed(actions, schema)
    if not pk:
        ordered = acts.selectExpr("*", "false AS _cdc_first", "CAST(NULL AS BIGINT) AS _cdc_next_ts",
                                  "CAST(NULL AS STRING) AS _cdc_next_op", "false AS _cdc_keep")
        return _typed_values(ordered, schema)
    # One sort per table: oldest first, so the latest action is the one with no next. Keys that
    # do not type are spread by their text (all in the null key's partition, one task sorted them).
    # Each window function repeats the one spec: Spark computes them in one window operator.
    by_key = f"OVER (PARTITION BY {', '.join(key_names)}, {_UNIDENTIFIED} ORDER BY {_oldest_first()})"
    return _typed_values(acts.selectExpr(
        "*",
        f"row_number() {by_key} = 1 AS _cdc_first",
        f"lead(commit_ts) {by_key} AS _cdc_next_ts",
        f"lead(op) {by_key} AS _cdc_next_op",
        f"_cdc_key_ok AND lead(true) {by_key} IS NULL AS _cdc_keep",
    ), schema)


def _keyed(actions: DataFrame, schema: TableSchema) -> DataFrame:
    """The table's actions with the current key typed (`key_column`) and `_cdc_key_ok`."""
    mine = actions.where(f"`database` = {string(schema.database)} AND `table` = {string(schema.table)}")
    pk = schema.primary_key
    key_names = [key_column(i) for i in range(len(pk))]
    key_ok = " AND ".join(["true", *[f"{k} IS NOT NULL" for k in key_names]]) if pk else "false"
    return mine.selectExpr(
        "kind AS _cdc_kind", *[f"{_typed_key(c, schema)} AS {k}" for c, k in zip(pk, key_names)],
        *_CARRIED, "`values`", f"{key_ok} AS _cdc_key_ok",
    )


def unsorted_typed_actions(actions: DataFrame, schema: TableSchema) -> DataFrame:
    """`typed_actions` before its sort, for a window small enough to order in the driver
    (snapshot/small_window.py): the typed key and values, `_cdc_key_ok`, the partition of an
    action whose key does not type (`UNIDENTIFIED_COLUMN`, its text as JSON) and the columns
    of `_oldest_first` (`ORDER_COLUMNS`, all ascending, nulls first), so that the latest,
    first and next action of each key are found there. A narrow plan: one Spark job, no
    shuffle."""
    acts = _keyed(actions, schema).selectExpr(
        "*", f"CASE WHEN NOT _cdc_key_ok THEN to_json(struct(pk_names, `key`)) END AS {UNIDENTIFIED_COLUMN}",
        f"{_TIE} AS {TIE_COLUMN}")
    return _typed_values(acts, schema, ordered=("_cdc_key_ok", UNIDENTIFIED_COLUMN, TIE_COLUMN))


def _typed_values(acts: DataFrame, schema: TableSchema, ordered: tuple[str, ...] = _ORDERED) -> DataFrame:
    """After the window's sort (a keyless table has none): each table column's value typed (`value_column`), and
    `_cdc_value_failures`, the values that were there and did not convert; `values` dropped.

    The sort carries the image as one map column: sorting the typed columns instead (one per
    table column) made the typed actions of 200,000 inserts into a 60-column table take
    26-40 s, against 9-15 s now. The failures are the image's non-null values of the non-key
    columns (key columns: counted by `_cdc_key_ok`) minus those that typed, since a typed value
    is null wherever its text is null. One expression that tested each column's text and
    typed value had Spark inline every typed value into it a second time (60 s before).
    """
    pk, cols = schema.primary_key, schema.columns
    others = [c for c in cols if c not in pk]
    kept = ["_cdc_kind", *[key_column(i) for i in range(len(pk))], *_CARRIED, *ordered]
    present = (f"coalesce(array_size(filter(map_entries(`values`), "
               f"e -> e.value IS NOT NULL AND e.key IN ({strings(others)}))), 0)") if others else "0"
    values = [value_column(i) for i in range(len(cols))]
    typed = acts.selectExpr(
        *kept,
        *[f"{typed_value_sql(f'try_element_at(`values`, {string(c)})', schema.spark_type_of(c))} AS {v}"
          for c, v in zip(cols, values)],
        f"{present} AS {_PRESENT}",
    )
    typed_count = " + ".join(["0", *[f"CAST({v} IS NOT NULL AS INT)" for c, v in zip(cols, values) if c not in pk]])
    return typed.selectExpr(*kept, *values, f"{_PRESENT} - ({typed_count}) AS _cdc_value_failures")


_NUMERIC_OR_BOOL = (T.NumericType, T.BooleanType)


def _retyped(value: Column, source: T.DataType, target: T.DataType) -> Column:
    """A typed column -> another type; null when it does not convert (never raises)."""
    if source == target:
        return value
    if isinstance(target, T.StringType):
        return value.cast(target)  # every type has an exact text form; decimals print plainly
    if isinstance(source, _NUMERIC_OR_BOOL) and isinstance(target, _NUMERIC_OR_BOOL):
        return value.try_cast(target)
    if isinstance(target, T.BooleanType):  # text as a change's value reads: `2` is true (typed_value)
        return typed_value(value.cast(T.StringType()), target)
    return value.cast(T.StringType()).try_cast(target)  # always a valid cast, unlike e.g. date -> binary


def stores_as(schema: TableSchema, previous: TableSchema) -> bool:
    """Whether rows of `previous` are already rows of `schema`: the same key, and the same
    columns in the same Spark types, so nothing conforms them (`_conform`). The schemas may
    still differ in what does not reach a stored value: a column's MySQL type text, or the
    integer digits learned for a decimal without parameters (TiCDC's default Canal-JSON),
    which only matter past Spark's 38 digits. Those windows merge their touched keys too,
    rather than rewrite the table whole."""
    return schema.primary_key == previous.primary_key and schema.spark_schema() == previous.spark_schema()


def _conform(df: DataFrame, schema: TableSchema) -> tuple[DataFrame, Column | None]:
    """Previous snapshot -> current schema (new columns null, changed types try_cast).

    Returns the frame and the per-row count of values that were non-null and became null;
    None when no column changes type (then no value can fail to convert).
    """
    target = schema.spark_schema()
    existing = {f.name: f.dataType for f in df.schema.fields}
    columns, originals, failures = [], [], F.lit(0)
    for i, f in enumerate(target.fields):
        if f.name not in existing:
            columns.append(F.lit(None).cast(f.dataType).alias(f.name))
        elif existing[f.name] == f.dataType:
            columns.append(F.col(f.name))
        else:
            columns.append(_retyped(F.col(f.name), existing[f.name], f.dataType).alias(f.name))
            originals.append(F.col(f.name).alias(f"_cdc_was_{i}"))
            lost = F.col(f"_cdc_was_{i}").isNotNull() & F.col(f.name).isNull()
            failures = failures + F.when(lost, 1).otherwise(0)
    return df.select(*columns, *originals), (failures if originals else None)


def conformed(df: DataFrame, schema: TableSchema) -> DataFrame:
    """A table's rows in `schema`, lazily (nothing counted): columns the row images added since
    are null, changed types try_cast, as `reconstruct_table` sees them."""
    return _conform(df, schema)[0].select(*schema.columns, COMMIT_TS_COLUMN)


def conform_frame(df: DataFrame, schema: TableSchema) -> tuple[DataFrame, int]:
    """A table's rows in `schema` (a DDL changed it) and how many values did not convert."""
    conformed, failures = _conform(df, schema)
    lost = 0 if failures is None else conformed.agg(F.coalesce(F.sum(failures), F.lit(0)).alias("f")).first().f
    return conformed.select(*schema.columns, COMMIT_TS_COLUMN), int(lost or 0)


def _typed_key(column: str, schema: TableSchema) -> str:
    """By name: an action's value of the current key column, typed (null when it does not convert); SQL text."""
    position = f"CAST(array_position(pk_names, {string(column)}) - 1 AS INT)"
    return typed_value_sql(f"get(`key`, {position})", schema.spark_type_of(column))


def reconstruct_table(
    actions: DataFrame,
    schema: TableSchema,
    previous: DataFrame | None,
    previous_rows: int | None = None,
    typed: DataFrame | None = None,
) -> TableResult:
    """Previous rows - touched keys + upserts; the frame is lazy. One Spark action (the
    counts), and one more over `previous` unless its row count is given and its columns
    already have the schema's types (then nothing can fail to convert).

    `actions`: `key_actions`; `typed`: their `typed_actions` for
    this table, when the caller already has them (cached, shared with the history)."""
    spark = actions.sparkSession
    pk = schema.primary_key
    cols = schema.columns
    key_names = [key_column(i) for i in range(len(pk))]
    value_names = [value_column(i) for i in range(len(cols))]
    acts = typed if typed is not None else typed_actions(actions, schema)
    is_upsert, is_delete = F.col("_cdc_kind") == _UPSERT, F.col("_cdc_kind") == _DELETE
    failures = F.when(F.col("_cdc_keep") & is_upsert, F.col("_cdc_value_failures")).otherwise(0)
    # A key that does not type counts once per (pk_names, key), however many actions it has.
    unidentified = F.count_distinct(F.when(~F.col("_cdc_key_ok"), F.struct("pk_names", "key")))

    if previous is not None:
        prev, conform_failures = _conform(previous, schema)
        if previous_rows is None or conform_failures is not None:
            lost = F.lit(0) if conform_failures is None else conform_failures
            stats = prev.agg(F.count(F.lit(1)).alias("rows"), F.coalesce(F.sum(lost), F.lit(0)).alias("f")).first()
            previous_rows, failed_conversions = int(stats.rows), int(stats.f)
        else:
            failed_conversions = 0
        prev = prev.select(*cols, COMMIT_TS_COLUMN)
    else:
        prev = spark.createDataFrame([], schema.spark_schema())
        previous_rows, failed_conversions = 0, 0

    in_prev = prev.select(*[F.col(c).alias(k) for c, k in zip(pk, key_names)], F.lit(True).alias("_cdc_in_prev"))
    counted = acts.where(F.col("_cdc_keep") | ~F.col("_cdc_key_ok"))  # what the counts read
    joined = (counted.join(in_prev, on=key_names, how="left") if pk
              else counted.withColumn("_cdc_in_prev", F.lit(None)))
    counts = joined.agg(
        F.count_if(F.col("_cdc_keep") & is_upsert & F.col("_cdc_in_prev").isNull()).alias("inserted"),
        F.count_if(F.col("_cdc_keep") & is_delete & F.col("_cdc_in_prev").isNotNull()).alias("deleted"),
        (F.coalesce(F.sum(failures), F.lit(0)) + unidentified).alias("failures"),
    ).first()

    kept_acts = acts.where("_cdc_keep")
    upserts = kept_acts.where(is_upsert).select(
        *[(F.col(key_names[pk.index(c)]) if c in pk else F.col(v)).alias(c) for c, v in zip(cols, value_names)],
        F.col("commit_ts").alias(COMMIT_TS_COLUMN),
    )
    touched = kept_acts.select(*[F.col(k).alias(c) for c, k in zip(pk, key_names)])
    kept = prev.join(touched, on=pk, how="left_anti") if pk else prev
    frame = kept.unionByName(upserts)
    return TableResult(schema, frame, previous_rows, int(counts.inserted or 0), int(counts.deleted or 0),
                       int(counts.failures or 0) + failed_conversions)



def merge_source(typed: DataFrame, schema: TableSchema, previous: DataFrame) -> TableResult:
    """A table whose rows alone changed (same schema, a primary key, a previous snapshot): the
    MERGE source of its touched keys, one row per key (`MERGE_PRESENT` null: the key is
    deleted), as `IcebergTable.write_window` takes it. Nothing runs here: the window's counts
    (inserted, deleted, conversion failures) and the source's rows and distinct keys (the
    primary-key check: one source row per key) are observed on the source, so they come with
    the job that materializes it for the MERGE (`observed_counts` reads them after the write);
    a small window applied in Arrow computes the same counts instead (`small_window`), and
    this plan never runs (built as SQL text, it costs a few py4j calls: common/sql_text).
    The previous snapshot is read for its keys only (were they there?), in that same job;
    its row count is the manifest's."""
    pk, cols = schema.primary_key, schema.columns
    key_names = [key_column(i) for i in range(len(pk))]
    is_upsert, is_delete = f"_cdc_kind = {string(_UPSERT)}", f"_cdc_kind = {string(_DELETE)}"
    in_prev = previous.selectExpr(*[f"{ident(c)} AS {k}" for c, k in zip(pk, key_names)], "true AS _cdc_in_prev")
    # the kept actions, the first of each key (distinct keys) and the unidentified ones
    joined = typed.where("_cdc_keep OR _cdc_first OR NOT _cdc_key_ok").join(in_prev, on=key_names, how="left")
    # `_cdc_first` is one row of each (typed key) or (unidentified pk_names, key): counting it
    # counts the distinct ones, which `observe` cannot (no DISTINCT aggregate).
    counted, metrics = observed(joined, *[F.expr(f"{aggregate} AS {name}") for name, aggregate in (
        ("inserted", f"count_if(_cdc_keep AND {is_upsert} AND _cdc_in_prev IS NULL)"),
        ("deleted", f"count_if(_cdc_keep AND {is_delete} AND _cdc_in_prev IS NOT NULL)"),
        ("value_failures", f"coalesce(sum(CASE WHEN _cdc_keep AND {is_upsert} THEN _cdc_value_failures END), 0)"),
        ("unidentified", "count_if(NOT _cdc_key_ok AND _cdc_first)"),
        ("source_rows", "count_if(_cdc_keep)"),
        ("source_keys", "count_if(_cdc_key_ok AND _cdc_first)"),
        ("matched", "count_if(_cdc_keep AND _cdc_in_prev IS NOT NULL)"),
    )])
    table_columns = [f"{key_names[pk.index(c)] if c in pk else value_column(i)} AS {ident(c)}"
                     for i, c in enumerate(cols)]
    source = counted.where("_cdc_keep").selectExpr(
        *table_columns, f"commit_ts AS {ident(COMMIT_TS_COLUMN)}",
        f"CASE WHEN {is_upsert} THEN true END AS {ident(MERGE_PRESENT)}",
    )
    # its schema is the table's
    rows = source.where(f"{ident(MERGE_PRESENT)} IS NOT NULL").selectExpr(*[ident(c) for c in cols],
                                                                         ident(COMMIT_TS_COLUMN))
    return TableResult(schema, rows, 0, 0, 0, 0, merge_source=source, observed=metrics)


def observed_counts(metrics: ObservedMetrics) -> dict[str, int]:
    """What `merge_source` observed, as `window_counts`. Call it only after the source was
    written: it waits for that job."""
    return window_counts(metrics.values())


def window_counts(got: dict) -> dict[str, int]:
    """`merge_source`'s aggregates (by their names there) as the window's counts: inserted and
    deleted keys, conversion failures, duplicate_source_keys (source rows - distinct keys; 0:
    one row per key) and matched_keys (source keys the previous snapshot has; 0: the MERGE
    only inserts)."""
    got = {k: int(v or 0) for k, v in got.items()}
    return {"inserted_keys": got["inserted"], "deleted_keys": got["deleted"],
            "conversion_failures": got["value_failures"] + got["unidentified"],
            "duplicate_source_keys": got["source_rows"] - got["source_keys"],
            "matched_keys": got["matched"]}

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

from pyspark.sql import Column, DataFrame, Window, functions as F, types as T

from cdc_assets.common.iceberg_tables import MERGE_PRESENT
from cdc_assets.common.mysql_types import (
    parse_mysql_type,
    spark_type,
    typed_value,
)
from cdc_assets.common.names import table_id
from cdc_assets.common.observed import ObservedMetrics, observed
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


def _oldest_first() -> list[Column]:
    # At one commit_ts, TiCDC's events (no source position) are one transaction's net changes:
    # a key's DELETE applies before its INSERT (a split update), whatever their partitions.
    # A binlog source's events (a position) can share one (commit_ts, position) over several
    # transactions (Canal: `es` in seconds, one id per batch). A key's own events are in its
    # partition, in Kafka order: an INSERT then a DELETE of it in one second leaves it deleted.
    # Only the old key's DELETE of a key-changing UPDATE travels with the new key, maybe in
    # another partition: it still comes first (a key is freed before it is taken again).
    first_at_a_tie = F.when(F.col("source_position").isNull() | (F.col("op") == UPDATE), F.col("order"))
    return [F.asc("commit_ts"), F.asc_nulls_first("source_position"), F.coalesce(first_at_a_tie, F.lit(1)).asc(),
            F.asc("kafka_partition"), F.asc("kafka_offset"), F.asc("event_index"), F.asc("order")]


def key_actions(changes: DataFrame) -> DataFrame:
    """Every key action of the row events, untyped (`typed_actions` finds the latest per key)."""
    rows = changes.where(F.col("event_kind") == ROW)
    before_pk = F.transform("pk_names", lambda n: F.try_element_at(F.col("before"), n))
    action = lambda kind, key, order, values: F.struct(  # noqa: E731
        F.lit(kind).alias("kind"), key.alias("key"), F.lit(order).alias("order"), values.alias("values")
    )
    acts = F.when(
        F.col("op") == DELETE,
        F.array(action(_DELETE, F.col("pk_values"), 0, F.lit(None).cast("map<string,string>"))),
    ).otherwise(
        F.when(
            (F.col("op") == UPDATE) & F.col("before").isNotNull() & (before_pk != F.col("pk_values")),
            F.array(
                action(_DELETE, before_pk, 0, F.lit(None).cast("map<string,string>")),
                action(_UPSERT, F.col("pk_values"), 1, F.col("after")),
            ),
        ).otherwise(F.array(action(_UPSERT, F.col("pk_values"), 1, F.col("after"))))
    )
    return rows.select(
        "database", "table", "pk_names", "op", "commit_ts", "source_position", "kafka_partition", "kafka_offset",
        "event_index",
        F.explode(acts).alias("a"),
    ).select("*", "a.kind", "a.key", "a.order", "a.values").drop("a")


def key_column(i: int) -> str:
    """`typed_actions`: the i-th current key column, typed."""
    return f"_cdc_k{i}"


def value_column(i: int) -> str:
    """`typed_actions`: the i-th table column's value, typed."""
    return f"_cdc_v{i}"


def typed_actions(actions: DataFrame, schema: TableSchema) -> DataFrame:
    """The table's actions (`key_actions`) with the current key and the values typed, and each
    action's place among its typed key's actions in commit order: `_cdc_keep` (the latest:
    it decides the key's row), `_cdc_first`, and the next action's `_cdc_next_ts` and
    `_cdc_next_op` (where the history's versions end). An action whose key does not type has
    `_cdc_key_ok` false and none of these."""
    mine = actions.where((F.col("database") == schema.database) & (F.col("table") == schema.table))
    pk = schema.primary_key
    key_names = [key_column(i) for i in range(len(pk))]
    acts = mine.select(
        F.col("kind").alias("_cdc_kind"),
        *[_typed_key(c, schema).alias(k) for c, k in zip(pk, key_names)],
        "pk_names", "key", "op", "commit_ts", "source_position", "order", "kafka_partition", "kafka_offset",
        "event_index", "values",
    )
    key_ok = F.lit(bool(pk))
    for k in key_names:
        key_ok = key_ok & F.col(k).isNotNull()
    acts = acts.withColumn("_cdc_key_ok", key_ok)
    if not pk:
        return _typed_values(acts.withColumns({
            "_cdc_first": F.lit(False), "_cdc_next_ts": F.lit(None).cast("long"),
            "_cdc_next_op": F.lit(None).cast("string"), "_cdc_keep": F.lit(False)}), schema)
    # One sort per table: oldest first, so the latest action is the one with no next. Keys that
    # do not type are spread by their text (all in the null key's partition, one task sorted them).
    unidentified = F.when(~F.col("_cdc_key_ok"), F.struct("pk_names", "key"))
    by_key = Window.partitionBy(*key_names, unidentified).orderBy(*_oldest_first())
    return _typed_values(acts.withColumns({
        "_cdc_first": F.row_number().over(by_key) == 1,
        "_cdc_next_ts": F.lead("commit_ts").over(by_key),
        "_cdc_next_op": F.lead("op").over(by_key),
        "_cdc_keep": F.col("_cdc_key_ok") & F.lead(F.lit(True)).over(by_key).isNull(),
    }), schema)


def _typed_values(acts: DataFrame, schema: TableSchema) -> DataFrame:
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
    present = F.coalesce(F.array_size(F.filter(
        F.map_entries("values"), lambda e: e.getField("value").isNotNull() & e.getField("key").isin(*others))), F.lit(0))
    typed = acts.select(
        "*",
        *[typed_value(F.try_element_at("values", F.lit(c)), schema.spark_type_of(c)).alias(value_column(i))
          for i, c in enumerate(cols)],
        present.alias(_PRESENT),
    ).drop("values")
    typed_count = sum((F.col(value_column(i)).isNotNull().cast("int") for i, c in enumerate(cols) if c not in pk),
                      F.lit(0))
    return typed.withColumn("_cdc_value_failures", F.col(_PRESENT) - typed_count).drop(_PRESENT)


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


def _typed_key(column: str, schema: TableSchema) -> Column:
    """By name: an action's value of the current key column, typed (null when it does not convert)."""
    position = (F.array_position("pk_names", F.lit(column)) - 1).cast("int")
    return typed_value(F.get(F.col("key"), position), schema.spark_type_of(column))


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
    this plan never runs.
    The previous snapshot is read for its keys only (were they there?), in that same job;
    its row count is the manifest's."""
    pk, cols = schema.primary_key, schema.columns
    key_names = [key_column(i) for i in range(len(pk))]
    is_upsert, is_delete = F.col("_cdc_kind") == _UPSERT, F.col("_cdc_kind") == _DELETE
    keep, key_ok = F.col("_cdc_keep"), F.col("_cdc_key_ok")
    in_prev = previous.select(*[F.col(c).alias(k) for c, k in zip(pk, key_names)],
                              F.lit(True).alias("_cdc_in_prev"))
    # the kept actions, the first of each key (distinct keys) and the unidentified ones
    joined = typed.where(keep | F.col("_cdc_first") | ~key_ok).join(in_prev, on=key_names, how="left")
    # `_cdc_first` is one row of each (typed key) or (unidentified pk_names, key): counting it
    # counts the distinct ones, which `observe` cannot (no DISTINCT aggregate).
    counted, metrics = observed(
        joined,
        F.count_if(keep & is_upsert & F.col("_cdc_in_prev").isNull()).alias("inserted"),
        F.count_if(keep & is_delete & F.col("_cdc_in_prev").isNotNull()).alias("deleted"),
        F.coalesce(F.sum(F.when(keep & is_upsert, F.col("_cdc_value_failures"))), F.lit(0)).alias("value_failures"),
        F.count_if(~key_ok & F.col("_cdc_first")).alias("unidentified"),
        F.count_if(keep).alias("source_rows"),
        F.count_if(key_ok & F.col("_cdc_first")).alias("source_keys"),
        F.count_if(keep & F.col("_cdc_in_prev").isNotNull()).alias("matched"),
    )
    source = counted.where(keep).select(
        *[(F.col(key_names[pk.index(c)]) if c in pk else F.col(value_column(i))).alias(c) for i, c in enumerate(cols)],
        F.col("commit_ts").alias(COMMIT_TS_COLUMN),
        F.when(is_upsert, F.lit(True)).alias(MERGE_PRESENT),
    )
    rows = source.where(F.col(MERGE_PRESENT).isNotNull()).drop(MERGE_PRESENT)  # its schema is the table's
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

"""Layer 4: each table's state at a window end = previous window's state + this window's changes.

Per primary key the latest change wins, ordered by (commit_ts, action order, Kafka
partition, offset, index); at the same key and commit_ts a DELETE applies before an
INSERT (a primary-key-changing update arrives as DELETE old key + INSERT new key in one
transaction). An UPDATE whose before image has another key also deletes the old key.
Deleted keys disappear. Tables without changes are carried over by reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window, functions as F, types as T

from cdc_assets.lib.changelog_schema import DELETE, ROW, UPDATE
from cdc_assets.lib.mysql_types import (
    is_decimal_without_params,
    parse_mysql_type,
    spark_type,
    typed_value,
)
from cdc_assets.lib.storage import table_id

COMMIT_TS_COLUMN = "_cdc_commit_ts"
_UPSERT, _DELETE = "upsert", "delete"


@dataclass
class TableSchema:
    database: str
    table: str
    columns: list[str]
    mysql_types: dict[str, str]
    primary_key: list[str]
    decimal_scales: dict[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return table_id(self.database, self.table)

    def spark_type_of(self, column: str) -> T.DataType:
        return spark_type(parse_mysql_type(self.mysql_types.get(column)), self.decimal_scales.get(column, 0))

    def spark_schema(self) -> T.StructType:
        fields = [T.StructField(c, self.spark_type_of(c), True) for c in self.columns]
        return T.StructType(fields + [T.StructField(COMMIT_TS_COLUMN, T.LongType(), True)])

    def to_json(self) -> dict:
        return {
            "database": self.database, "table": self.table, "columns": self.columns,
            "mysql_types": self.mysql_types, "primary_key": self.primary_key,
            "decimal_scales": self.decimal_scales,
        }

    @classmethod
    def from_json(cls, d: dict) -> "TableSchema":
        return cls(d["database"], d["table"], list(d["columns"]), dict(d["mysql_types"]),
                   list(d["primary_key"]), dict(d.get("decimal_scales", {})))

    def merged_with(self, newer: "TableSchema") -> "TableSchema":
        """Columns keep their order; new ones are appended; the newest type wins."""
        columns = self.columns + [c for c in newer.columns if c not in self.columns]
        scales = dict(self.decimal_scales)
        for c, s in newer.decimal_scales.items():
            scales[c] = max(s, scales.get(c, 0))
        return TableSchema(self.database, self.table, columns,
                           {**self.mysql_types, **newer.mysql_types},
                           newer.primary_key or self.primary_key, scales)


@dataclass
class TableResult:
    schema: TableSchema
    frame: DataFrame
    previous_rows: int
    inserted_keys: int
    deleted_keys: int
    conversion_failures: int


def key_actions(changes: DataFrame) -> DataFrame:
    """One row per (table, key) action, latest action per key only."""
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
    exploded = rows.select(
        "database", "table", "pk_names", "commit_ts", "source_position", "kafka_partition", "kafka_offset",
        "event_index",
        F.explode(acts).alias("a"),
    ).select("*", "a.kind", "a.key", "a.order", "a.values").drop("a")
    latest_first = Window.partitionBy("database", "table", "key").orderBy(
        F.desc("commit_ts"), F.desc_nulls_last("source_position"), F.desc("order"), F.desc("kafka_partition"),
        F.desc("kafka_offset"), F.desc("event_index"),
    )
    return exploded.withColumn("_rank", F.row_number().over(latest_first)).where("_rank = 1").drop("_rank")


def window_table_schemas(changes: DataFrame) -> dict[tuple[str, str], TableSchema]:
    """Schema of every table touched in the window, from its newest row event."""
    rows = changes.where(F.col("event_kind") == ROW)
    order = F.struct("commit_ts", "source_position", "kafka_partition", "kafka_offset", "event_index")
    latest = rows.groupBy("database", "table").agg(
        F.max_by(F.map_keys(F.coalesce("after", "before")), order).alias("columns"),
        F.max_by("column_types", order).alias("types"),
        F.max_by("pk_names", order).alias("pk"),
    ).collect()
    schemas = {
        (r.database, r.table): TableSchema(r.database, r.table, list(r.columns), dict(r.types or {}), list(r.pk))
        for r in latest
    }
    _infer_decimal_scales(rows, schemas)
    return schemas


def _infer_decimal_scales(rows: DataFrame, schemas: dict[tuple[str, str], TableSchema]) -> None:
    """For decimals declared without (p, s), keep the largest scale seen (lossless)."""
    wanted = [
        (db, tbl, col)
        for (db, tbl), s in schemas.items()
        for col, t in s.mysql_types.items()
        if is_decimal_without_params(parse_mysql_type(t))
    ]
    if not wanted:
        return
    entries = rows.select("database", "table", F.explode("after").alias("col", "v"), "column_types").where(
        F.lower(F.try_element_at("column_types", F.col("col"))).rlike(r"^\s*(decimal|numeric)\s*$")
        & F.col("v").contains(".")
    )
    scales = entries.groupBy("database", "table", "col").agg(
        F.max(F.length(F.substring_index("v", ".", -1))).alias("scale")
    ).collect()
    for r in scales:
        schemas[(r.database, r.table)].decimal_scales[r.col] = int(r.scale)


def _typed_columns(values: Column, schema: TableSchema) -> list[Column]:
    return [typed_value(F.try_element_at(values, F.lit(c)), schema.spark_type_of(c)).alias(c)
            for c in schema.columns]


def _conform(df: DataFrame, schema: TableSchema) -> DataFrame:
    """Previous snapshot -> current schema (new columns null, changed types cast)."""
    target = schema.spark_schema()
    existing = set(df.columns)
    return df.select(*[
        (F.col(f.name).cast(f.dataType) if f.name in existing else F.lit(None).cast(f.dataType)).alias(f.name)
        for f in target.fields
    ])


def reconstruct_table(
    latest: DataFrame,
    schema: TableSchema,
    previous: DataFrame | None,
) -> TableResult:
    spark = latest.sparkSession
    mine = latest.where((F.col("database") == schema.database) & (F.col("table") == schema.table))
    pk = schema.primary_key
    upserts = mine.where(F.col("kind") == _UPSERT).select(
        *_typed_columns(F.col("values"), schema),
        F.col("commit_ts").alias(COMMIT_TS_COLUMN),
        *[F.try_element_at("values", F.lit(c)).alias(f"_raw_{i}") for i, c in enumerate(schema.columns)],
    )
    failures = F.lit(0)
    for i, c in enumerate(schema.columns):
        failures = failures + F.when(F.col(f"_raw_{i}").isNotNull() & F.col(c).isNull(), 1).otherwise(0)
    conversion_failures = upserts.agg(F.coalesce(F.sum(failures), F.lit(0))).first()[0]
    upserts = upserts.select(*schema.columns, COMMIT_TS_COLUMN)

    keys = mine.select(
        F.col("kind"),
        *[typed_value(F.try_element_at("key", F.lit(i)), schema.spark_type_of(c)).alias(c)
          for i, c in enumerate(pk, start=1)],
    )
    prev = _conform(previous, schema) if previous is not None else spark.createDataFrame([], schema.spark_schema())
    counts = keys.join(
        prev.select(*pk).withColumn("_in_prev", F.lit(True)), on=pk, how="left"
    ).agg(
        F.count_if((F.col("kind") == _UPSERT) & F.col("_in_prev").isNull()).alias("inserted"),
        F.count_if((F.col("kind") == _DELETE) & F.col("_in_prev").isNotNull()).alias("deleted"),
    ).first()
    previous_rows = prev.count() if previous is not None else 0
    kept = prev.join(keys.select(*pk), on=pk, how="left_anti")
    frame = kept.unionByName(upserts)
    return TableResult(schema, frame, previous_rows, int(counts.inserted or 0), int(counts.deleted or 0),
                       int(conversion_failures or 0))


def read_table(spark: SparkSession, path: str, schema_json: str) -> DataFrame:
    return spark.read.schema(T.StructType.fromJson(json.loads(schema_json))).parquet(path)


def snapshot_root(warehouse_source_root: Path) -> Path:
    return warehouse_source_root / "snapshots"

"""A window's DDL events as barriers between the row events around them.

Barriers are the window's DDL events in commit order, each parsed into schema changes
(`lib/ddl`). A row event's *segment* is the number of barriers that come before it, so the
rows of segment s happened after barrier s-1 and before barrier s.

Order between a row and a DDL: commit_ts first. At the same commit_ts (sources whose
commit_ts is a millisecond), the source's own position decides when both have one; else
Kafka order when both are in the same partition; else the row counts as after the DDL
(a CREATE TABLE never empties a table, so a row that raced it is kept).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.lib.changelog_schema import DDL
from cdc_assets.lib.ddl import SchemaChange, parse_ddl

SEGMENT = "_cdc_segment"


@dataclass(frozen=True)
class Barrier:
    index: int
    database: str
    table: str
    commit_ts: int
    source_position: int | None
    kafka_partition: int
    kafka_offset: int
    event_index: int
    ddl_type: str | None
    sql: str
    changes: tuple[SchemaChange, ...]
    # The table after the DDL, when the protocol carries it as structure (Debezium tableChanges).
    declared_columns: dict[str, str] | None = None
    declared_primary_key: tuple[str, ...] = ()


def window_barriers(changes: DataFrame) -> list[Barrier]:
    """The window's DDL events in commit order, parsed (one small Spark action)."""
    rows = (
        changes.where(F.col("event_kind") == DDL)
        .select("database", "table", "commit_ts", "source_position", "kafka_partition", "kafka_offset",
                "event_index", "ddl_type", "ddl_sql", "column_types", "pk_names")
        .orderBy("commit_ts", F.asc_nulls_last("source_position"), "kafka_partition", "kafka_offset",
                 "event_index")
        .collect()
    )
    return [
        Barrier(i, r.database or "", r.table or "", int(r.commit_ts), r.source_position, int(r.kafka_partition),
                int(r.kafka_offset), int(r.event_index), r.ddl_type, r.ddl_sql or "",
                tuple(parse_ddl(r.ddl_sql or "", r.database or "")),
                dict(r.column_types) if r.column_types else None, tuple(r.pk_names or ()))
        for i, r in enumerate(rows)
    ]


def with_segments(rows: DataFrame, barriers: list[Barrier]) -> DataFrame:
    """Add SEGMENT: how many barriers come before each row (one expression, any barrier count)."""
    if not barriers:
        return rows.withColumn(SEGMENT, F.lit(0))
    marks = F.array(*[
        F.struct(F.lit(b.commit_ts).cast("long").alias("ts"), F.lit(b.source_position).cast("long").alias("pos"),
                 F.lit(b.kafka_partition).alias("p"), F.lit(b.kafka_offset).cast("long").alias("o"),
                 F.lit(b.event_index).alias("i"))
        for b in barriers
    ])
    return rows.withColumn(SEGMENT, F.size(F.filter(marks, _row_is_after)))


def _row_is_after(b: Column) -> Column:
    ts, pos = F.col("commit_ts"), F.col("source_position")
    both_positions = pos.isNotNull() & b["pos"].isNotNull()
    same_partition = F.col("kafka_partition") == b["p"]
    kafka_after = (F.col("kafka_offset") > b["o"]) | (
        (F.col("kafka_offset") == b["o"]) & (F.col("event_index") > b["i"]))
    tie = (F.when(both_positions, pos > b["pos"])
           .when(same_partition, kafka_after)
           .otherwise(F.lit(True)))
    return (ts > b["ts"]) | ((ts == b["ts"]) & tie)

"""A window's DDL events as barriers between the row events around them.

Barriers are the window's DDL events in commit order, each parsed into schema changes
(`lib/ddl`). A row event's *segment* is the number of barriers that come before it, so the
rows of segment s happened after barrier s-1 and before barrier s.

Order between a row and a DDL: commit_ts first. At the same commit_ts (sources whose
commit_ts is a millisecond), the source's own position decides when both have one; else
Kafka order when both are in the same partition of the same topic; else the row counts as
after the DDL (a CREATE TABLE never empties a table, so a row that raced it is kept).

Renames that share a commit_ts are applied in an order MySQL could have run them
(`rename_order`): TiCDC splits `RENAME TABLE a TO c, b TO a, c TO b` into one event per
table, all at the statement's commit_ts, and its storage sink writes each to its own file,
so nothing else tells their order.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.lib.changelog_schema import DDL
from cdc_assets.lib.ddl import RenameTable, SchemaChange, parse_ddl

SEGMENT = "_cdc_segment"


@dataclass(frozen=True)
class Barrier:
    index: int
    database: str
    table: str
    commit_ts: int
    source_position: int | None
    topic: str
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
        .select("database", "table", "commit_ts", "source_position", "topic", "kafka_partition", "kafka_offset",
                "event_index", "ddl_type", "ddl_sql", "column_types", "pk_names")
        .orderBy("commit_ts", F.asc_nulls_last("source_position"), "topic", "kafka_partition", "kafka_offset",
                 "event_index")
        .collect()
    )
    return [
        Barrier(i, r.database or "", r.table or "", int(r.commit_ts), r.source_position, r.topic,
                int(r.kafka_partition), int(r.kafka_offset), int(r.event_index), r.ddl_type, r.ddl_sql or "",
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
                 F.lit(b.topic).alias("t"), F.lit(b.kafka_partition).alias("p"),
                 F.lit(b.kafka_offset).cast("long").alias("o"),
                 F.lit(b.event_index).alias("i"))
        for b in barriers
    ])
    return rows.withColumn(SEGMENT, F.size(F.filter(marks, _row_is_after)))


def _row_is_after(b: Column) -> Column:
    ts, pos = F.col("commit_ts"), F.col("source_position")
    both_positions = pos.isNotNull() & b["pos"].isNotNull()
    same_partition = (F.col("topic") == b["t"]) & (F.col("kafka_partition") == b["p"])
    kafka_after = (F.col("kafka_offset") > b["o"]) | (
        (F.col("kafka_offset") == b["o"]) & (F.col("event_index") > b["i"]))
    tie = (F.when(both_positions, pos > b["pos"])
           .when(same_partition, kafka_after)
           .otherwise(F.lit(True)))
    return (ts > b["ts"]) | ((ts == b["ts"]) & tie)


def is_single_rename(b: Barrier) -> bool:
    return len(b.changes) == 1 and isinstance(b.changes[0], RenameTable)


def rename_order(renames: list[Barrier], existing: set[tuple[str, str]]) -> list[Barrier]:
    """Single-table renames that share a commit_ts, each in turn the first (in the given order)
    that moves a table that exists to a name that is free, given the tables that exist before
    them; the given order where none does (a table this snapshot never had)."""
    names, pending, ordered = set(existing), list(renames), []
    while pending:
        runnable = [b for b in pending if b.changes[0].table in names and b.changes[0].new_table not in names]
        b = runnable[0] if runnable else pending[0]
        pending.remove(b)
        ordered.append(b)
        names.discard(b.changes[0].table)
        names.add(b.changes[0].new_table)
    return ordered

"""A window's DDL events as barriers between the row events around them.

Barriers are the window's DDL events in commit order, each parsed into schema changes
(`snapshot/ddl/parse`). A row event's *segment* is the number of barriers that come before it, so the
rows of segment s happened after barrier s-1 and before barrier s.

Order between a row and a DDL: commit_ts first. At the same commit_ts (sources whose
commit_ts is a millisecond), the source's own position decides when both have different ones;
else Kafka order when both are in the same partition of the same topic; else a row with the
DDL's position counts as before it, and a row without one as after it (a CREATE TABLE never
empties a table, so a row that raced it is kept). Against a snapshot's own DDL (op READ:
Debezium's schema events of an initial snapshot) binlog positions decide, whatever the clocks:
the snapshot's rows, at its position, and the changes streamed after it come after it.

Renames that share a commit_ts are applied in an order MySQL could have run them
(`rename_order`): TiCDC splits `RENAME TABLE a TO c, b TO a, c TO b` into one event per
table, all at the statement's commit_ts, and its storage sink writes each to its own file,
so nothing else tells their order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.contracts.schemas import DDL, READ
from cdc_assets.snapshot.ddl.parse import RenameTable, SchemaChange, TableName, parse_ddl

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
    # READ: the DDL was read from a snapshot (Debezium's initial snapshot writes its schema first)
    op: str | None = None


_DDL_COLUMNS = ("database", "table", "commit_ts", "source_position", "topic", "kafka_partition", "kafka_offset",
                "event_index", "ddl_type", "ddl_sql", "column_types", "pk_names", "op")


def ddl_rows(changes: DataFrame, *by: str) -> DataFrame:
    """The window's DDL events (with the columns `by`), unordered: `barriers_from` orders the
    collected rows (a sort in Spark would cost a sampling job and a shuffle for a handful of rows)."""
    return changes.where(F.col("event_kind") == DDL).select(*by, *_DDL_COLUMNS)


def _nulls_first(value) -> tuple:
    return (0,) if value is None else (1, value)


def _commit_order(r) -> tuple:
    # As Spark orders them: ascending, nulls first but for the source position (nulls last).
    # Python compares text by code point, as Spark does (UTF-8 byte order is code point order).
    return (_nulls_first(r.commit_ts), (1,) if r.source_position is None else (0, r.source_position),
            _nulls_first(r.topic), _nulls_first(r.kafka_partition), _nulls_first(r.kafka_offset),
            _nulls_first(r.event_index))


def barriers_from(rows: list) -> list[Barrier]:
    """Collected `ddl_rows` as barriers, in commit order, parsed."""
    return [
        Barrier(i, r.database or "", r.table or "", int(r.commit_ts), r.source_position, r.topic,
                int(r.kafka_partition), int(r.kafka_offset), int(r.event_index), r.ddl_type, r.ddl_sql or "",
                tuple(parse_ddl(r.ddl_sql or "", r.database or "")),
                dict(r.column_types) if r.column_types else None, tuple(r.pk_names or ()), r.op)
        for i, r in enumerate(sorted(rows, key=_commit_order))
    ]


def with_segments(rows: DataFrame, barriers: list[Barrier]) -> DataFrame:
    """Add SEGMENT: how many barriers come before each row (one expression, any barrier count)."""
    if not barriers:
        return rows.withColumn(SEGMENT, F.lit(0))
    marks = F.array(*[
        F.struct(F.lit(b.commit_ts).cast("long").alias("ts"), F.lit(b.source_position).cast("long").alias("pos"),
                 F.lit(b.topic).cast("string").alias("t"), F.lit(b.kafka_partition).alias("p"),
                 F.lit(b.kafka_offset).cast("long").alias("o"),
                 F.lit(b.event_index).alias("i"), F.lit(b.op == READ).alias("snapshot"))
        for b in barriers
    ])
    return rows.withColumn(SEGMENT, F.size(F.filter(marks, _row_is_after)))


def _row_is_after(b: Column) -> Column:
    ts, pos = F.col("commit_ts"), F.col("source_position")
    both_positions = pos.isNotNull() & b["pos"].isNotNull()
    same_partition = (F.col("topic") == b["t"]) & (F.col("kafka_partition") == b["p"])
    kafka_after = (F.col("kafka_offset") > b["o"]) | (
        (F.col("kafka_offset") == b["o"]) & (F.col("event_index") > b["i"]))
    # Equal positions (a Canal batch id shared by a whole batch) leave it to Kafka's order in
    # one partition; across partitions the row counts as before the DDL, as its position says.
    tie = (F.when(both_positions & (pos != b["pos"]), pos > b["pos"])
           .when(same_partition, kafka_after)
           .otherwise(~both_positions))
    by_clock = (ts > b["ts"]) | ((ts == b["ts"]) & tie)
    # A snapshot's schema (Debezium stamps it with the connector's clock, in ms) stands at the
    # snapshot's binlog position: its rows (the database's clock, whole seconds, often earlier)
    # and the changes streamed after it are at or after that position, whatever their clocks.
    return F.when(b["snapshot"] & both_positions, pos >= b["pos"]).otherwise(by_clock)


def is_single_rename(b: Barrier) -> bool:
    return len(b.changes) == 1 and isinstance(b.changes[0], RenameTable)


def order_unknown(group: list[Barrier]) -> bool:
    """Events at one commit_ts whose order nothing tells: no source position, and no two in one
    partition of one topic (Kafka order)."""
    streams = {(b.topic, b.kafka_partition) for b in group}
    return all(b.source_position is None for b in group) and len(streams) == len(group)


Move = tuple[TableName, TableName]


def rename_order(renames: list[Barrier], existing: set[TableName]) -> tuple[list[Barrier], bool]:
    """Single-table renames that share a commit_ts and whose order is unknown, in an order that
    could have run given the tables that exist before them: the given order if it can, else each
    in turn the first that moves an existing table to a free name. A table that only some
    rename moves away existed before them all. Also says whether that order is a guess: a
    table the snapshot does not know (an empty one) may have existed, and the rows would end
    under other names if it did."""
    moves = [(b.changes[0].table, b.changes[0].new_table) for b in renames]
    targets = {new for _, new in moves}
    names = set(existing) | {old for old, _ in moves if old not in targets}
    if _runs(moves, names):
        return renames, False
    order = [renames[i] for i in _greedy(moves, names)]
    maybe = sorted({old for old, _ in moves if old not in names and old in targets})
    if len(maybe) > 4:  # too many to try: call it a guess
        return order, True
    outcomes = set()
    for extra in itertools.chain.from_iterable(itertools.combinations(maybe, k) for k in range(len(maybe) + 1)):
        start = names | set(extra)
        tried = [moves[i] for i in _greedy(moves, start)]
        if _runs(tried, start):
            outcomes.add(_where_rows_end(tried, start, names))
            if len(outcomes) > 1:
                return order, True
    return order, False


def _runs(moves: list[Move], names: set[TableName]) -> bool:
    names = set(names)
    for old, new in moves:
        if old not in names or new in names:
            return False
        names.remove(old)
        names.add(new)
    return True


def _greedy(moves: list[Move], names: set[TableName]) -> list[int]:
    names, pending, order = set(names), list(range(len(moves))), []
    while pending:
        i = next((i for i in pending if moves[i][0] in names and moves[i][1] not in names), pending[0])
        pending.remove(i)
        order.append(i)
        names.discard(moves[i][0])
        names.add(moves[i][1])
    return order


def _where_rows_end(moves: list[Move], start: set[TableName], known: set[TableName]) -> frozenset:
    """(final name, original name) of every table the snapshot knows, after `moves`."""
    at = {n: n for n in start}
    for old, new in moves:
        at[new] = at.pop(old)
    return frozenset((name, origin) for name, origin in at.items() if origin in known)

"""Data contracts: pandera models (pyspark.sql backend) + row invariants with counts.

pandera checks the schema and column domains; `invariant_counts` counts the rows that
break the cross-column rules pandera's column checks cannot express (a row event
needs an op, a commit_ts and a full primary key; a DDL needs its SQL).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandera.pyspark as pa
from pandera.pyspark import DataFrameModel, Field
from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.lib.changelog_schema import DDL, EVENT_KINDS, ROW, ROW_OPS, WATERMARK

_STR_MAP = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)


class ChangeLogModel(DataFrameModel):
    """Layer 2: every decoded event (rows, DDL, watermarks)."""

    topic: T.StringType() = Field(nullable=False)
    kafka_partition: T.IntegerType() = Field(ge=0)
    kafka_offset: T.LongType() = Field(ge=0)
    kafka_timestamp: T.TimestampType() = Field(nullable=True)
    event_index: T.IntegerType() = Field(ge=0)
    event_kind: T.StringType() = Field(isin=list(EVENT_KINDS))
    op: T.StringType() = Field(isin=list(ROW_OPS), nullable=True)
    database: T.StringType() = Field(nullable=True)
    table: T.StringType() = Field(nullable=True)
    commit_ts: T.LongType() = Field(gt=0, nullable=True)
    commit_time: T.TimestampType() = Field(nullable=True)
    source_position: T.LongType() = Field(nullable=True)
    event_time: T.TimestampType() = Field(nullable=True)
    pk_names: T.ArrayType(T.StringType(), True) = Field(nullable=True)
    pk_values: T.ArrayType(T.StringType(), True) = Field(nullable=True)
    before: _STR_MAP = Field(nullable=True)
    after: _STR_MAP = Field(nullable=True)
    column_types: _STR_MAP = Field(nullable=True)
    ddl_type: T.StringType() = Field(nullable=True)
    ddl_sql: T.StringType() = Field(nullable=True)
    watermark_ts: T.LongType() = Field(gt=0, nullable=True)

    class Config:
        strict = True
        name = "change_log"


class ChangeTableModel(ChangeLogModel):
    """Layer 3: deduplicated, aligned rows and DDL (no watermarks)."""

    event_kind: T.StringType() = Field(isin=[ROW, DDL])

    class Config:
        strict = True
        name = "change_table"


@dataclass(frozen=True)
class ValidationOutcome:
    failed_checks: list[dict]
    invariant_violations: dict[str, int]

    @property
    def passed(self) -> bool:
        return not self.failed_checks and not any(self.invariant_violations.values())

    @property
    def failure_count(self) -> int:
        return len(self.failed_checks) + sum(self.invariant_violations.values())


def _invariants() -> dict[str, Column]:
    kind = F.col("event_kind")
    is_row = kind == ROW
    return {
        "row_without_op": is_row & F.col("op").isNull(),
        "row_without_commit_ts": is_row & F.col("commit_ts").isNull(),
        "row_without_table": is_row & (F.col("database").isNull() | F.col("table").isNull()),
        "row_without_full_key": is_row & (
            (F.coalesce(F.size("pk_names"), F.lit(0)) <= 0)
            | F.exists("pk_values", lambda v: v.isNull())
            | (F.size("pk_names") != F.size("pk_values"))
        ),
        "row_without_image": is_row & F.col("before").isNull() & F.col("after").isNull(),
        "ddl_without_sql": (kind == DDL) & (F.coalesce(F.length(F.trim("ddl_sql")), F.lit(0)) == 0),
        "watermark_without_ts": (kind == WATERMARK) & F.col("watermark_ts").isNull(),
    }


def invariant_counts(df: DataFrame) -> dict[str, int]:
    rules = _invariants()
    row = df.agg(*[F.count_if(c).alias(name) for name, c in rules.items()]).first()
    return {name: int(row[name] or 0) for name in rules}


def validate(model: type[DataFrameModel], df: DataFrame) -> ValidationOutcome:
    checked = model.validate(check_obj=df)
    errors = dict(checked.pandera.errors or {})
    failed = [
        {"level": level, "kind": kind, **err}
        for level, by_kind in errors.items()
        for kind, errs in by_kind.items()
        for err in errs
    ]
    return ValidationOutcome(failed, invariant_counts(df))


__all__ = ["ChangeLogModel", "ChangeTableModel", "ValidationOutcome", "invariant_counts", "validate", "pa"]

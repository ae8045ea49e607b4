"""Data contracts: pandera models (pyspark.sql backend), built from the contracts' columns in
`contracts/schemas.py`, + row invariants with counts.

pandera checks the schema (columns, Spark types, no extra columns). Its data checks run one
Spark job each (`filter(~check).limit(1).count()`: a dozen per contract); here the
models' own column checks (`nullable`, `ge`, `gt`, `isin`) and the cross-column invariants
pandera cannot express (a row event needs an op, a commit_ts and a full primary key; a DDL
needs its SQL) are counted together in one aggregate, so a failure also says how many rows.
The pipeline observes that aggregate on the job that writes the frame (`observed`): no job of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandera.pyspark as pa
from pandera.api.checks import Check
from pandera.config import ValidationDepth, config_context
from pandera.pyspark import DataFrameModel, Field
from pyspark.sql import Column, DataFrame, Observation, functions as F

from cdc_assets.contracts.schemas import CHANGE_LOG, CHANGE_TABLE, DDL, ROW, WATERMARK, ContractColumn


def contract_model(class_name: str, name: str, doc: str, columns: Sequence[ContractColumn]) -> type[DataFrameModel]:
    """The pandera model of a contract's columns (`contracts/schemas.py`): the same names,
    order, Spark types, nullability and checks as its Spark schema; strict (no other columns)."""
    namespace = {
        "__doc__": doc,
        "__module__": __name__,
        "__annotations__": {c.name: c.data_type for c in columns},
        **{c.name: Field(nullable=c.nullable, **c.checks) for c in columns},
        "Config": type("Config", (), {"strict": True, "name": name}),
    }
    return type(class_name, (DataFrameModel,), namespace)


ChangeLogModel = contract_model("ChangeLogModel", "change_log", "Layer 2: every decoded event (rows, DDL, watermarks).",
                                CHANGE_LOG)
ChangeTableModel = contract_model("ChangeTableModel", "change_table",
                                  "Layer 3: deduplicated, aligned rows and DDL (no watermarks).", CHANGE_TABLE)


@dataclass(frozen=True)
class ValidationOutcome:
    failed_checks: list[dict]
    invariant_violations: dict[str, int]

    @property
    def passed(self) -> bool:
        return not self.failed_checks and not any(self.invariant_violations.values())

    @property
    def failure_count(self) -> int:
        """Failing rows per data check and invariant; a schema error counts once."""
        return sum(c.get("failing_rows", 1) for c in self.failed_checks) + sum(self.invariant_violations.values())


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


# A pandera check -> the rows that fail it (a null passes, as in pandera: nullability is its own check).
_VIOLATIONS = {
    "greater_than_or_equal_to": lambda c, s: c < F.lit(s["min_value"]),
    "greater_than": lambda c, s: c <= F.lit(s["min_value"]),
    "isin": lambda c, s: ~c.isin(list(s["allowed_values"])),
}


def column_rules(model: type[DataFrameModel]) -> dict[tuple[str, str], Column]:
    """(column, check name) -> a condition true on each row that fails the model's check."""
    schema = model.to_schema()
    # Data checks of other kinds would be skipped by the schema-only pandera pass: refuse them.
    if schema.checks or schema.unique or any(c.unique for c in schema.columns.values()):
        raise NotImplementedError(f"{model.__name__}: only column checks are counted (see validate)")
    rules: dict[tuple[str, str], Column] = {}
    for name, column in schema.columns.items():
        c = F.col(name)
        if not column.nullable:
            rules[(name, "not_nullable")] = c.isNull()
        for check in column.checks:
            rules[(name, check.name)] = _violation(check, c)
    return rules


def _violation(check: Check, c: Column) -> Column:
    if check.name not in _VIOLATIONS:
        raise NotImplementedError(f"pandera check {check.name!r}: add its Spark condition to _VIOLATIONS")
    return c.isNotNull() & _VIOLATIONS[check.name](c, check.statistics)


def _schema_errors(model: type[DataFrameModel], df: DataFrame) -> list[dict]:
    """Columns, Spark types and strictness. pandera counts a null in a non-nullable column
    as a schema error with a job per column: nulls are counted in `validate`'s job instead."""
    schema = model.to_schema()
    schema = schema.update_columns({name: {"nullable": True} for name in schema.columns})
    with config_context(validation_depth=ValidationDepth.SCHEMA_ONLY):
        checked = schema.validate(check_obj=df)
    return [
        {"level": level, "kind": kind, **err}
        for level, by_kind in dict(checked.pandera.errors or {}).items()
        for kind, errs in by_kind.items()
        for err in errs
    ]


def validate(model: type[DataFrameModel], df: DataFrame) -> ValidationOutcome:
    """The model's schema (pandera), then its column checks and the invariants in one Spark job."""
    counts = ContractCounts.of(model, df)
    if not counts.metrics:
        return counts.outcome({})
    return counts.outcome(df.agg(*counts.metrics).first().asDict())


@dataclass(frozen=True)
class ContractCounts:
    """A model's schema errors (pandera, no Spark job) and the aggregates that count its
    column checks and the invariants (`metrics`, none when the schema is wrong: the columns
    are not what the rules expect). The aggregates can run as their own job (`validate`) or
    ride on the job that writes the frame (`observed`)."""

    model: type[DataFrameModel]
    schema_errors: list[dict]
    metrics: list[Column]
    columns: list[tuple[str, str]]

    @classmethod
    def of(cls, model: type[DataFrameModel], df: DataFrame) -> ContractCounts:
        schema_errors = _schema_errors(model, df)
        if schema_errors:
            return cls(model, schema_errors, [], [])
        columns, invariants = column_rules(model), _invariants()
        metrics = [
            *[F.count_if(cond).alias(f"{_PREFIX}c{i}") for i, cond in enumerate(columns.values())],
            *[F.count_if(cond).alias(f"{_PREFIX}{name}") for name, cond in invariants.items()],
        ]
        return cls(model, [], metrics, list(columns))

    def outcome(self, row: dict) -> ValidationOutcome:
        """The outcome from the aggregates' values (`row`: metric name -> count)."""
        if self.schema_errors:
            return ValidationOutcome(self.schema_errors, {})
        failed = [
            {"level": "DATA", "kind": "DATAFRAME_CHECK", "schema": self.model.Config.name, "column": column,
             "check": check, "failing_rows": int(row[f"{_PREFIX}c{i}"])}
            for i, (column, check) in enumerate(self.columns)
            if row[f"{_PREFIX}c{i}"]
        ]
        return ValidationOutcome(failed, {name: int(row[f"{_PREFIX}{name}"] or 0) for name in _invariants()})


_PREFIX = "contract_"


def observed(model: type[DataFrameModel], df: DataFrame,
             extra: Sequence[str] = ()) -> tuple[DataFrame, Callable[[], ValidationOutcome]]:
    """`df` with the model's counts observed (`DataFrame.observe`), and the outcome: call it
    after the first action on the returned frame (the write), which fills the counts. The
    schema is checked now (no job), on `df` without its `extra` columns (which ride along)."""
    counts = ContractCounts.of(model, df.drop(*extra) if extra else df)
    if not counts.metrics:
        return df, lambda: counts.outcome({})
    observation = Observation()
    return df.observe(observation, *counts.metrics), lambda: counts.outcome(observation.get)


__all__ = ["ChangeLogModel", "ChangeTableModel", "ContractCounts", "ValidationOutcome", "column_rules", "observed",
           "validate", "pa"]

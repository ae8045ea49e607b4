"""The layer contracts: pandera's schema check, then every column check and row invariant
counted in one Spark job."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession, types as T

from cdc_assets.contracts.checks import ChangeLogModel, ChangeTableModel, column_rules, pa, validate
from cdc_assets.contracts.schemas import CHANGE_LOG, CHANGE_LOG_SCHEMA, CHANGE_TABLE

# Nullable everywhere, so that a test can put a null where the contract forbids one.
_SCHEMA = T.StructType([T.StructField(f.name, f.dataType, True) for f in CHANGE_LOG_SCHEMA.fields])


def _event(offset: int, **overrides) -> dict:
    event = {f.name: None for f in _SCHEMA.fields}
    event.update(
        topic="t", kafka_partition=0, kafka_offset=offset, event_index=0, event_kind="row", op="INSERT",
        database="db", table="t1", commit_ts=400_000_000_000_000_000 + offset, pk_names=["id"],
        pk_values=[str(offset)], after={"id": str(offset)}, column_types={"id": "int"},
    )
    event.update(overrides)
    return event


def _frame(spark: SparkSession, events: list[dict]):
    return spark.createDataFrame([tuple(e[f.name] for f in _SCHEMA.fields) for e in events], _SCHEMA)


def _failing(outcome) -> dict[tuple[str, str], int]:
    return {(f["column"], f["check"]): f["failing_rows"] for f in outcome.failed_checks}


def test_valid_events_pass(spark):
    ddl = _event(9, event_kind="ddl", op=None, pk_names=None, pk_values=None, after=None, column_types=None,
                 ddl_type="CREATE TABLE", ddl_sql="CREATE TABLE t1 (id INT PRIMARY KEY)")
    watermark = _event(10, event_kind="watermark", op=None, database=None, table=None, commit_ts=None,
                       pk_names=None, pk_values=None, after=None, column_types=None, watermark_ts=5)
    outcome = validate(ChangeLogModel, _frame(spark, [_event(1), _event(2), ddl, watermark]))
    assert outcome.passed, (outcome.failed_checks, outcome.invariant_violations)
    assert outcome.failure_count == 0
    assert set(outcome.invariant_violations) >= {"row_without_op", "row_without_full_key", "ddl_without_sql"}


def test_every_failing_check_is_counted_by_rows(spark):
    events = [
        _event(1),
        _event(-1),                                 # kafka_offset >= 0
        _event(-2, kafka_partition=-1),             # both lineage checks
        _event(3, topic=None),                      # topic is not nullable
        _event(4, event_kind="bogus", op=None),     # event_kind isin
        _event(5, op="MERGE"),                      # op isin
        _event(6, commit_ts=0),                     # commit_ts > 0
        _event(7, pk_values=[None]),                # invariant: a full key
        _event(8, op=None),                         # invariant: a row needs an op
    ]
    outcome = validate(ChangeLogModel, _frame(spark, events))
    assert not outcome.passed
    assert _failing(outcome) == {
        ("kafka_offset", "greater_than_or_equal_to"): 2,
        ("kafka_partition", "greater_than_or_equal_to"): 1,
        ("topic", "not_nullable"): 1,
        ("event_kind", "isin"): 1,
        ("op", "isin"): 1,
        ("commit_ts", "greater_than"): 1,
    }
    violations = {k: v for k, v in outcome.invariant_violations.items() if v}
    assert violations == {"row_without_full_key": 1, "row_without_op": 1}
    assert outcome.failure_count == 7 + 2  # failing rows per check, plus the invariants


def test_the_change_table_contract_refuses_watermarks(spark):
    watermark = _event(1, event_kind="watermark", op=None, commit_ts=None, pk_names=None, pk_values=None,
                       after=None, column_types=None, watermark_ts=5)
    assert validate(ChangeLogModel, _frame(spark, [watermark])).passed
    assert _failing(validate(ChangeTableModel, _frame(spark, [watermark]))) == {("event_kind", "isin"): 1}


@pytest.mark.parametrize("change", ["extra column", "wrong type", "missing column"])
def test_a_frame_of_another_shape_fails_the_schema_check_without_raising(spark, change):
    df = _frame(spark, [_event(1)])
    if change == "extra column":
        df = df.withColumn("surprise", df.kafka_offset)
    elif change == "wrong type":
        df = df.withColumn("kafka_offset", df.kafka_offset.cast("string"))
    else:
        df = df.drop("commit_ts")
    outcome = validate(ChangeLogModel, df)
    assert not outcome.passed
    assert {f["level"] for f in outcome.failed_checks} == {"SCHEMA"}


def test_the_data_checks_run_as_one_spark_job(spark):
    """pandera's own data checks ran a job per check (two dozen per window)."""
    df = _frame(spark, [_event(i) for i in range(20)]).cache()
    df.count()
    spark.sparkContext.setJobGroup("contract", "contract")
    try:
        validate(ChangeLogModel, df)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup("contract")
    df.unpersist()
    assert 1 <= len(jobs) <= 2  # one aggregate (AQE may split it at its exchange)


def test_every_check_of_both_models_has_a_spark_condition():
    for model in (ChangeLogModel, ChangeTableModel):
        rules = column_rules(model)
        assert ("event_kind", "isin") in rules and ("topic", "not_nullable") in rules


def test_a_model_with_a_check_the_aggregate_cannot_count_is_refused():
    """pandera's schema-only pass would skip a frame-wide check: it must not pass unseen."""

    class WithFrameCheck(ChangeLogModel):
        @pa.dataframe_check
        def anything(cls, df):  # noqa: N805 (pandera's signature)
            return True

    with pytest.raises(NotImplementedError, match="only column checks"):
        column_rules(WithFrameCheck)


def test_the_spark_schema_and_the_pandera_model_are_one_contract():
    for model, columns in ((ChangeLogModel, CHANGE_LOG), (ChangeTableModel, CHANGE_TABLE)):
        schema = model.to_schema()
        assert list(schema.columns) == [c.name for c in columns] == CHANGE_LOG_SCHEMA.fieldNames()
        for c, f in zip(schema.columns.values(), CHANGE_LOG_SCHEMA.fields):
            assert (c.dtype.type, c.nullable) == (f.dataType, f.nullable)
    assert ChangeTableModel.to_schema().columns["event_kind"].checks[0].statistics["allowed_values"] == ["row", "ddl"]

"""Figures of a frame computed by the job that materializes it (`DataFrame.observe`), so that
a count costs no Spark job of its own (docs/performance.md)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation


def checkpointed_with_metrics(frame: DataFrame, *metrics: Column) -> tuple[DataFrame, dict]:
    """`frame.localCheckpoint()` and `metrics` (named aggregates) over its rows, observed by
    the checkpoint's own job. Spark Connect returns no observed metrics for a checkpoint (it
    gives `{}`, measured with Spark 4.1), so there they come from an aggregate over the
    checkpointed rows: one short job more, only under Connect."""
    observation = Observation()
    checkpointed = frame.observe(observation, *metrics).localCheckpoint()
    got = observation.get
    if not got:
        got = checkpointed.agg(*metrics).first().asDict()
    return checkpointed, got

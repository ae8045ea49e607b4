"""Figures of a frame computed by the job that materializes it (`DataFrame.observe`), so that
a count costs no Spark job of its own (docs/performance.md).

Spark Connect returns no observed metrics for a `localCheckpoint` (it gives `{}`, measured
with Spark 4.1; on a write it does return them): there the figures come from an aggregate
over the same frame, one short job more, under Connect only."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation


@dataclass(frozen=True)
class ObservedMetrics:
    """Named aggregates observed on `frame`; `values()` once the job that materializes the
    observed frame ran (it waits for that job)."""

    observation: Observation
    frame: DataFrame  # the frame as observed (before the observer), for Connect's fallback
    metrics: tuple[Column, ...]

    def values(self) -> dict:
        try:
            got = self.observation.get
        except Exception:  # Spark 4.1 can fail to convert the metrics row (an assertion in toPyRow)
            got = {}
        return got if got else self.frame.agg(*self.metrics).first().asDict()


def observed(frame: DataFrame, *metrics: Column) -> tuple[DataFrame, ObservedMetrics]:
    """`frame` with `metrics` observed on it, and the handle that reads them."""
    observation = Observation()
    return frame.observe(observation, *metrics), ObservedMetrics(observation, frame, metrics)


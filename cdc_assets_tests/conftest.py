"""One local SparkSession for the whole test run (UI off, few shuffle partitions)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_assets.common.settings import load_settings
from cdc_assets.common.spark_session import spark_config, start_spark_session

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE = REPO.parent / "shared" / "conformance"

# Tests never touch the user's ./.cdc_assets or DAGSTER_HOME.
os.environ.pop("DAGSTER_HOME", None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow modules first, the daemon backfill (mostly waiting on its 30 s ticks) before all:
    `make test` hands modules to its workers in this order (pytest-xdist: --dist loadscope
    --no-loadscope-reorder; its default would put the modules with most tests first), so the
    long ones start early instead of forming the tail. Stable: modules keep their order."""
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("daemon"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    conf = spark_config(load_settings({}))
    # 4g: the 20 MiB-message tests (decode/test_message_size.py) hold several copies of such a
    # message in the JVM; with 2g, the other tests' cached frames beside them could run the one
    # session out of heap, and every later test of that worker failed with it.
    conf.update({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"})
    session = start_spark_session(conf)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def conformance() -> Path:
    if not CONFORMANCE.exists():
        pytest.fail(f"the shared conformance corpus is expected at {CONFORMANCE}")
    return CONFORMANCE

"""One local SparkSession for the whole test run (UI off, few shuffle partitions)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_assets.defs.resources import spark_config, start_spark_session
from cdc_assets.lib.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE = REPO.parent / "shared" / "conformance"

# Tests never touch the user's ./.cdc_assets or DAGSTER_HOME.
os.environ.pop("DAGSTER_HOME", None)


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    conf = spark_config(load_settings({}))
    conf.update({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"})
    session = start_spark_session(conf)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def conformance() -> Path:
    if not CONFORMANCE.exists():
        pytest.fail(f"the shared conformance corpus is expected at {CONFORMANCE}")
    return CONFORMANCE

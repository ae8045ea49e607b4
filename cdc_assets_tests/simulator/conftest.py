"""One default-sized dump per layout, shared by the simulator tests (generation ~0.5 s)."""

from __future__ import annotations

import json

import pytest

from cdc_assets.simulator import GeneratedDump, generate
from cdc_assets_tests.simulator.dump_reading import read_records


@pytest.fixture(scope="session")
def parquet_dump(tmp_path_factory) -> GeneratedDump:
    return generate(tmp_path_factory.mktemp("sim-parquet"), layout="kafka-parquet")


@pytest.fixture(scope="session")
def kcat_dump(tmp_path_factory) -> GeneratedDump:
    return generate(tmp_path_factory.mktemp("sim-kcat"), layout="kcat-jsonl")


@pytest.fixture(scope="session")
def records(parquet_dump):
    return read_records(parquet_dump)


@pytest.fixture(scope="session")
def truth(parquet_dump) -> dict:
    return json.loads(parquet_dump.truth_path.read_text(encoding="utf-8"))

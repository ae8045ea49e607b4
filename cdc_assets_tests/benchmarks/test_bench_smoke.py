"""`make bench` in miniature: every engine gives the expected answer on a small dump (no
timing assertions: figures live in BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from benchmarks import check, engines, report
from benchmarks.dump import DumpSpec, generate_dump
from benchmarks.measure import Measured, Run, run_engine
from benchmarks.protocols import dump_info, protocol_dump, protocols


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    return generate_dump(DumpSpec(2_000, seed=3, hours=2), tmp_path_factory.mktemp("bench"))


def test_dump_is_cached_and_counts_what_it_wrote(dump, tmp_path):
    counts = dump.info["counts"]
    assert counts["row_events"] == 2_000
    assert counts["messages"] == 2_000 + counts["duplicates"] + counts["late"] + counts["watermarks"]
    assert counts["duplicates"] > 0 and counts["late"] > 0
    assert generate_dump(dump.spec, dump.root.parent).root == dump.root  # cached, not rewritten
    assert sum(counts["expected_rows"].values()) == sum(r for r, _ in check.expected(dump.root).values())


@pytest.mark.slow
def test_every_engine_gives_the_expected_answer(dump, tmp_path, spark):
    want = check.expected(dump.root)
    engines.duckdb_sql(dump.root, tmp_path / "duckdb")
    assert check.fingerprint_files(tmp_path / "duckdb" / "out") == want
    engines.spark_naive(dump.root, tmp_path / "naive")
    assert check.fingerprint_files(tmp_path / "naive" / "out") == want
    engines.cdc_pipeline(dump.root, tmp_path / "cdc")
    assert check.fingerprint_snapshots(tmp_path / "cdc" / "pipeline_snapshots") == want


def test_harness_measures_a_child_process_and_renders_the_report(dump, tmp_path):
    run = run_engine("read_floor_arrow", dump.root, tmp_path)
    assert run.extra["value_bytes"] == dump.info["counts"]["value_bytes"]
    assert run.peak_rss_mb > 10 and run.wall_s >= run.job_s
    section = {"events": 2_000, "info": dump.info,
               "results": {"read_floor_arrow": Measured("read_floor_arrow", [run])}}
    text = report.render([section], None, command="make bench", total_s=1.0)
    assert "| `read_floor_arrow`" in text and "## 2,000 row events" in text


def test_decode_per_protocol_step(tmp_path, spark):
    """Each protocol's simulator dump decodes without a reject, and the report lists it."""
    per_protocol = []
    for protocol in protocols():
        root = protocol_dump(protocol, tmp_path, seed=5, row_changes=300)
        assert protocol_dump(protocol, tmp_path, seed=5, row_changes=300) == root  # cached
        result = engines.cdc_decode_protocol(root, tmp_path / "work")
        info = dump_info(root)
        assert result["rejected"] == 0, protocol
        assert result["events"] >= info["counts"]["row_events"] > 0, protocol
        run = Run(result["job_s"], result["job_s"], 1.0, result["session_s"], {"events": result["events"]})
        per_protocol.append({"protocol": protocol, "info": info, "measured": Measured("cdc_decode_protocol", [run])})
    text = report.render([], None, command="make bench", total_s=1.0, per_protocol=per_protocol)
    assert "| `open-protocol` (`open-protocol`)" in text and "| `canal-official` (`canal-json`)" in text

"""The pipeline beyond one machine: the same replay on a Spark standalone cluster and on a
Spark Connect server (both started from the pyspark package on loopback) writes the same
snapshots as local mode.

The dump is Open Protocol, whose decoder runs Python (`mapInArrow`) in the executors' (or the
Connect server's) Python workers, so the cluster path covers more than the JVM. Each replay
runs in its own `cdc-assets replay` process: this test process already owns a local JVM.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from dagster import DagsterInstance

from cdc_assets.replay import replay
from cdc_assets.simulator import generate
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import differences_from_truth, settings_for
from cdc_assets_tests.servers import LOOPBACK, VENV_BIN, spark_connect, spark_env, spark_standalone

HOUR = 3_600_000
PROTOCOL = "open-protocol"
pytestmark = [pytest.mark.slow, pytest.mark.cluster]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, spark):
    tmp = tmp_path_factory.mktemp("cluster")
    dump = generate(tmp / "sim", seed=31, layout="kafka-parquet", protocol=PROTOCOL, row_changes=200,
                    duration_ms=int(2.5 * HOUR))
    settings = settings_for(tmp / "home", dump.dump_dir, protocol=PROTOCOL)
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.ok and summary.windows >= 2
    assert differences_from_truth(settings, dump.truth_path) == {}
    return tmp, dump, settings.warehouse


def snapshot_contents(warehouse: Path) -> dict[int, dict[str, list]]:
    """Every materialized window's tables as sorted rows (snapshots differ, content must not)."""
    root = (warehouse, "src")  # (warehouse, source)
    out = {}
    for window in list_manifests(*root):
        tables = read_manifest(*root, window).tables
        out[window] = {tid: sorted(map(repr, read_entry_arrow(*root, e).to_pylist())) for tid, e in tables.items()}
    return out


def replay_in_subprocess(dump: Path, warehouse: Path, master: str, work: Path) -> dict:
    env = {**os.environ, **spark_env(work),
           "CDC_ASSETS_HOME": str(work / "home"),
           "CDC_ASSETS_SPARK_MASTER": master,
           # Small driver and executors; everything binds to loopback.
           "CDC_ASSETS_SPARK_CONF": f"spark.driver.memory=1g,spark.executor.memory=768m,spark.driver.host={LOOPBACK},"
                                    "spark.sql.shuffle.partitions=2"}
    env.pop("DAGSTER_HOME", None)
    proc = subprocess.run(
        [str(VENV_BIN / "cdc-assets"), "replay", "--protocol", PROTOCOL, "--input", str(dump),
         "--warehouse", str(warehouse), "--source", "src"],
        env=env, cwd=work, capture_output=True, text=True, timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_standalone_cluster_writes_the_snapshots_of_local_mode(local_run):
    tmp, dump, local_warehouse = local_run
    work = tmp / "standalone"
    work.mkdir()
    with spark_standalone(work, cores=1, memory="1g") as master:
        summary = replay_in_subprocess(dump.dump_dir, work / "wh", master, work)
    assert summary["ok"] and summary["windows"] >= 2
    assert snapshot_contents(work / "wh") == snapshot_contents(local_warehouse)
    # The work really ran in the worker's executor, not in a local fallback.
    assert any((work / "worker").rglob("stderr"))


def test_spark_connect_writes_the_snapshots_of_local_mode(local_run):
    tmp, dump, local_warehouse = local_run
    work = tmp / "connect"
    work.mkdir()
    with spark_connect(work) as remote:
        summary = replay_in_subprocess(dump.dump_dir, work / "wh", remote, work)
    assert summary["ok"] and summary["windows"] >= 2
    assert snapshot_contents(work / "wh") == snapshot_contents(local_warehouse)
    log = (work / "connect.log").read_text(errors="replace")
    # The jobs ran in the Connect server, for a client session, which the run's process
    # released as it exited (else each run's session would stay until the idle timeout).
    assert "Spark Connect - session_id" in log
    assert "Closing session with userId" in log
    # `cdc-assets connect-server` gave the server JVM the settings (CDC_ASSETS_SPARK_CONF).
    assert "-Xmx1g" in log

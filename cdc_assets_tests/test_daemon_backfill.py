"""A partition backfill through the real daemon: `dagster-webserver` and `dagster-daemon` run
as subprocesses on loopback with a temporary DAGSTER_HOME; the backfill is launched through
the GraphQL API, and every window of every layer must materialize, in window order, with
every asset check passing.

Slow by nature (each run is a subprocess with its own Spark driver, and the backfill daemon
ticks every 30 s): the dump is tiny and has two complete windows. The backfill makes four
runs: the upstream layers of each window, then each window's snapshot in order. Measured on
2 shared cores under heavy load (load average ~15): 514 s for the backfill, 642 s in all.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from dagster import DagsterInstance
from dagster_graphql import DagsterGraphQLClient

from cdc_assets.decode import get_decoder
from cdc_assets.landing.land import land
from cdc_assets.simulator import generate
from cdc_assets.simulator.compare import load_truth

pytestmark = [pytest.mark.slow, pytest.mark.daemon]

SOURCE = "src"
LAYERS = ("raw_messages", "quarantine", "change_table", "snapshots", "history")
CHECKS = {
    "quarantine": ["nothing_quarantined", "quarantine_rate_within_limit"],
    "change_table": ["window_complete", "events_inside_window", "change_log_contract", "change_table_contract"],
    "snapshots": ["primary_key_unique", "reconciliation", "values_convert", "tables_built", "ddl_applied"],
}
HOUR = 3_600_000
TIMEOUT_S = 900

DAGSTER_YAML = """\
storage:
  sqlite:
    base_dir: {home}
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 1
    dequeue_interval_seconds: 2
run_launcher:
  module: dagster.core.launcher
  class: DefaultRunLauncher
telemetry:
  enabled: false
"""

WORKSPACE_YAML = """\
load_from:
  - python_module:
      module_name: cdc_assets.definitions
      location_name: cdc_assets
"""

LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on UnauthorizedError { message }
  }
}"""

BACKFILL = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status runs { id status creationTime startTime endTime tags { key value } } }
    ... on PythonError { message }
  }
}"""

MATERIALIZATIONS = """
query Mats($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset { assetMaterializations(limit: 100) {
      partition runId timestamp
      metadataEntries { label ... on MarkdownMetadataEntry { mdStr } ... on IntMetadataEntry { intValue } }
    } }
  }
}"""

CHECK_EXECUTIONS = """
query Checks($key: AssetKeyInput!, $check: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $check, limit: 100) {
    status partition runId evaluation { severity }
  }
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, procs: dict[str, subprocess.Popen], logs: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        for name, p in procs.items():
            if p.poll() is not None:
                pytest.fail(f"{name} exited with {p.returncode}:\n{_tail(logs / f'{name}.log')}")
        try:
            if requests.get(f"{url}/server_info", timeout=2).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(1)
    pytest.fail(f"the webserver did not answer:\n{_tail(logs / 'webserver.log')}")


WORKSPACE_STATUS = """
query Workspace {
  workspaceOrError {
    __typename
    ... on Workspace { locationEntries { name loadStatus
      locationOrLoadError { __typename ... on PythonError { message } } } }
  }
}"""


def _wait_for_code_location(url: str, logs: Path, deadline: float) -> None:
    """`/server_info` answers before the code location has loaded; until it has, the asset
    graph is empty and a backfill launch fails with a KeyError."""
    entries: list = []
    while time.monotonic() < deadline:
        workspace = _gql(url, WORKSPACE_STATUS)["workspaceOrError"]
        entries = workspace.get("locationEntries") or []
        for e in entries:
            loaded = e["locationOrLoadError"] or {}
            if loaded.get("__typename") == "PythonError":
                pytest.fail(f"code location {e['name']} did not load: {loaded['message']}")
        if entries and all(e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries):
            return
        time.sleep(1)
    pytest.fail(f"the code location did not load: {entries}\n{_tail(logs / 'webserver.log')}")


def _tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


def _stop(p: subprocess.Popen) -> None:
    """Stop a process we started and its children (its own session: code servers, runs)."""
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # orphans of the group (a run still finishing)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def dagster_stack(tmp_path_factory, spark):
    """A tiny dump with two complete windows, already landed; webserver and daemon up."""
    tmp = tmp_path_factory.mktemp("daemon")
    dump = generate(tmp / "sim", seed=3, layout="kafka-parquet", row_changes=120, duration_ms=int(2.5 * HOUR))
    truth = load_truth(dump.truth_path)
    complete = [w["start_ms"] for w in truth["windows"] if w["complete"]]
    assert len(complete) == 2
    home, warehouse, logs = tmp / "dagster_home", tmp / "warehouse", tmp / "logs"
    for d in (home, logs):
        d.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML.format(home=home))
    # Create the SQLite storage once, here: the webserver's code server and the daemon would
    # otherwise both stamp a fresh schedule database at the same moment, leaving two alembic
    # heads, and the code location then fails to load.
    DagsterInstance.from_config(str(home)).dispose()
    (tmp / "workspace.yaml").write_text(WORKSPACE_YAML)
    land(spark, dump_root=dump.dump_dir, layout="kafka-parquet",
         decoder=get_decoder("canal-json", {"time-zone": "UTC"}),
         warehouse=warehouse, source=SOURCE, window_ms=HOUR)

    env = {**os.environ, "DAGSTER_HOME": str(home), "CDC_ASSETS_HOME": str(tmp / "cdc_home"),
           "CDC_ASSETS_WAREHOUSE": str(warehouse), "CDC_ASSETS_SOURCE": SOURCE,
           "CDC_ASSETS_INPUT": str(dump.dump_dir), "CDC_ASSETS_PROTOCOL": "canal-json",
           "CDC_ASSETS_SPARK_MASTER": "local[1]", "PYSPARK_PYTHON": sys.executable}
    bin_dir = Path(sys.executable).parent
    port = _free_port()
    commands = {
        "webserver": [str(bin_dir / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
                      "-w", str(tmp / "workspace.yaml")],
        "daemon": [str(bin_dir / "dagster-daemon"), "run", "-w", str(tmp / "workspace.yaml")],
    }
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name, cmd in commands.items():
            log = (logs / f"{name}.log").open("w")
            procs[name] = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        _wait_for_server(url, procs, logs, time.monotonic() + 180)
        _wait_for_code_location(url, logs, time.monotonic() + 180)
        yield {"url": url, "port": port, "windows": complete, "logs": logs, "procs": procs}
    finally:
        for p in procs.values():
            _stop(p)


def _gql(url: str, query: str, **variables) -> dict:
    resp = requests.post(f"{url}/graphql", json={"query": query, "variables": variables}, timeout=60)
    assert resp.ok, f"GraphQL answered {resp.status_code}: {resp.text[:3000]}"
    body = resp.json()
    assert "errors" not in body, body["errors"]
    return body["data"]


def _partition_key(ms: int) -> str:
    return time.strftime("%Y-%m-%d-%H:%M", time.gmtime(ms / 1000))


def test_backfill_through_the_daemon_materializes_every_window_in_order(dagster_stack):
    url, logs = dagster_stack["url"], dagster_stack["logs"]
    keys = [_partition_key(w) for w in dagster_stack["windows"]]
    started = time.monotonic()
    launched = _gql(url, LAUNCH, params={
        "partitionNames": keys,
        "assetSelection": [{"path": [SOURCE, layer]} for layer in LAYERS],
        "title": "test backfill",
    })["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill_id = launched["backfillId"]

    status, runs = None, []
    while time.monotonic() - started < TIMEOUT_S:
        backfill = _gql(url, BACKFILL, id=backfill_id)["partitionBackfillOrError"]
        status, runs = backfill["status"], backfill["runs"]
        if status not in ("REQUESTED", "CANCELING", "FAILING"):
            break
        for name, p in dagster_stack["procs"].items():
            assert p.poll() is None, f"{name} died:\n{_tail(logs / f'{name}.log')}"
        time.sleep(3)
    elapsed = time.monotonic() - started
    print(f"backfill of {len(keys)} windows x {len(LAYERS)} layers: {status} in {elapsed:.0f} s, {len(runs)} runs")
    assert status in ("COMPLETED", "COMPLETED_SUCCESS"), (
        f"backfill {status} after {elapsed:.0f} s; runs {[(r['id'], r['status']) for r in runs]}\n"
        f"{_tail(logs / 'daemon.log')}")

    # Every run succeeded; the client reads the same status the UI shows.
    client = DagsterGraphQLClient("127.0.0.1", port_number=dagster_stack["port"])
    assert runs and all(client.get_run_status(r["id"]).value == "SUCCESS" for r in runs)

    # Every layer materialized every window.
    snapshot_mats = {}
    for layer in LAYERS:
        mats = _gql(url, MATERIALIZATIONS, key={"path": [SOURCE, layer]})["assetOrError"]["assetMaterializations"]
        assert sorted({m["partition"] for m in mats}) == keys, layer
        if layer == "snapshots":
            snapshot_mats = {m["partition"]: m for m in mats}
        if layer == "change_table":
            # What the UI shows: counts, and the charts as inline SVG images.
            for m in mats:
                entries = {e["label"]: e for e in m["metadataEntries"]}
                assert {"events_in", "events_out", "duplicates_dropped", "late_dropped", "quarantined"} <= set(entries)
                for chart in ("events_per_minute_chart", "watermark_lag_chart"):
                    assert entries[chart]["mdStr"].startswith("![") and "data:image/svg+xml;base64," in entries[chart]["mdStr"]

    # Window N's snapshot was built after window N-1's (TimeWindowPartitionMapping(-1, -1)):
    # the windows whose change tables were ready at a daemon tick are one run (the snapshots'
    # BackfillPolicy.single_run), which applies them in order; a later run starts once the
    # previous snapshot is done.
    run_start = {r["id"]: r["startTime"] for r in runs}
    for prev, cur in zip(keys, keys[1:]):
        prev_done = float(snapshot_mats[prev]["timestamp"]) / 1000
        cur_done = float(snapshot_mats[cur]["timestamp"]) / 1000
        if snapshot_mats[cur]["runId"] == snapshot_mats[prev]["runId"]:
            assert cur_done > prev_done, (prev, cur)
        else:
            assert run_start[snapshot_mats[cur]["runId"]] >= prev_done, (prev, cur)

    # Every check ran once per window and passed (WARN checks included).
    for layer, names in CHECKS.items():
        for name in names:
            executions = _gql(url, CHECK_EXECUTIONS, key={"path": [SOURCE, layer]}, check=name)["assetCheckExecutions"]
            assert sorted(e["partition"] for e in executions) == keys, (layer, name)
            assert {e["status"] for e in executions} == {"SUCCEEDED"}, (layer, name, executions)

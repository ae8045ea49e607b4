"""Servers that tests start on free loopback ports (moto's S3, Iceberg's REST catalog fixture,
Spark standalone, Spark Connect).

Each runs in its own process group and is stopped, with its children, when the context exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from cdc_assets.common.spark_connect_server import remote_url, spark_home

LOOPBACK = "127.0.0.1"
VENV_BIN = Path(sys.executable).parent
SPARK_HOME = spark_home()
REPO = Path(__file__).resolve().parents[1]
REST_FIXTURE_POM = REPO / "jars" / "rest-fixture" / "pom.xml"
# Where `make rest-fixture` (or the first REST catalog test) puts the fixture's jars.
REST_FIXTURE_JARS = Path(os.environ.get("CDC_ASSETS_REST_FIXTURE_JARS", Path(sys.prefix) / "rest-fixture-jars"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{_tail(log)}")
        with socket.socket() as s:
            if s.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on {LOOPBACK}:{port} after {timeout_s}s:\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


@contextmanager
def server_process(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """Start `cmd` in a new process group; on exit stop the whole group (SIGTERM, then SIGKILL)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                start_new_session=True)
    try:
        yield proc
    finally:
        for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue


def spark_env(work: Path) -> dict[str, str]:
    """Spark daemons of a test: loopback only, logs and pid files in the test's folder."""
    return {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_PID_DIR": str(work),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@contextmanager
def moto_s3(work: Path) -> Iterator[str]:
    """moto's standalone S3 server over HTTP; yields its endpoint URL."""
    port = free_port()
    log = work / "moto.log"
    with server_process([str(VENV_BIN / "moto_server"), "-H", LOOPBACK, "-p", str(port)], log) as proc:
        wait_for_port(port, proc, log)
        yield f"http://{LOOPBACK}:{port}"


def rest_fixture_jars() -> Path:
    """The jars of Iceberg's REST catalog fixture (jars/rest-fixture/pom.xml), fetched with Maven
    the first time (Maven Central only); a RuntimeError saying why when they cannot be."""
    folder = REST_FIXTURE_JARS
    if any(folder.glob("iceberg-open-api-*-test-fixtures.jar")):
        return folder
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"the REST catalog fixture's jars are not in {folder} and there is no Maven (mvn) "
                           "to fetch them: run `make rest-fixture` where Maven is installed")
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    done = subprocess.run([mvn, "--quiet", "--batch-mode", "-f", str(REST_FIXTURE_POM), "dependency:copy-dependencies",
                           f"-DoutputDirectory={partial}"], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError("mvn could not fetch the REST catalog fixture's jars:\n"
                           f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    try:
        partial.rename(folder)
    except OSError:  # another test process fetched them meanwhile
        shutil.rmtree(partial, ignore_errors=True)
    return folder


@contextmanager
def rest_catalog(work: Path) -> Iterator[str]:
    """Iceberg's REST catalog fixture (`org.apache.iceberg.rest.RESTCatalogServer`, a JDBC
    catalog on SQLite behind the REST API) in a JVM of its own; yields its http:// URL. Its
    backend needs Hadoop's client jars, taken from pyspark."""
    hadoop = sorted(str(p) for p in (SPARK_HOME / "jars").glob("hadoop-client-*.jar"))
    classpath = os.pathsep.join([str(rest_fixture_jars() / "*"), *hadoop])
    port = free_port()
    log = work / "rest-catalog.log"
    env = {"CATALOG_URI": f"jdbc:sqlite:{work / 'rest-catalog.db'}", "CATALOG_WAREHOUSE": str(work / "rest-warehouse"),
           "CATALOG_REST_PORT": str(port)}  # RCKUtils: CATALOG_<NAME> -> catalog property <name>
    cmd = ["java", "-Xmx256m", "-cp", classpath, "org.apache.iceberg.rest.RESTCatalogServer"]
    with server_process(cmd, log, env) as proc:
        wait_for_port(port, proc, log)
        yield f"http://{LOOPBACK}:{port}"


@contextmanager
def spark_standalone(work: Path, cores: int = 1, memory: str = "1g") -> Iterator[str]:
    """A standalone master and one worker from the pyspark package; yields spark://host:port
    once the worker has registered."""
    env = spark_env(work)
    port = free_port()
    master_log, worker_log = work / "master.log", work / "worker.log"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_cmd = [spark_class, "org.apache.spark.deploy.master.Master",
                  "--host", LOOPBACK, "--port", str(port), "--webui-port", str(free_port())]
    url = f"spark://{LOOPBACK}:{port}"
    with server_process(master_cmd, master_log, env) as master:
        wait_for_port(port, master, master_log)
        worker_cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                      "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory, url]
        with server_process(worker_cmd, worker_log, env) as worker:
            _wait_for_log(master_log, "Registering worker", worker, worker_log)
            yield url


@contextmanager
def spark_connect(work: Path) -> Iterator[str]:
    """`cdc-assets connect-server` (what users run) on local[1]; yields sc://host:port."""
    env = {**spark_env(work), "CDC_ASSETS_HOME": str(work / "server_home"),
           "CDC_ASSETS_SPARK_CONF": "spark.driver.memory=1g",
           "SPARK_PRINT_LAUNCH_COMMAND": "1"}  # the JVM's command line goes to the log
    port = free_port()
    log = work / "connect.log"
    cmd = [str(VENV_BIN / "cdc-assets"), "connect-server", "--master", "local[1]",
           "--host", LOOPBACK, "--port", str(port)]
    with server_process(cmd, log, env) as proc:
        wait_for_port(port, proc, log)
        yield remote_url(LOOPBACK, port)


def _wait_for_log(log: Path, text: str, proc: subprocess.Popen, proc_log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}:\n{_tail(proc_log)}")
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.3)
    raise TimeoutError(f"{text!r} not in {log} after {timeout_s}s:\n{_tail(log)}")

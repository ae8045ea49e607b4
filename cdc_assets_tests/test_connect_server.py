"""`cdc-assets connect-server`: the server gets the settings a local run would use.

The server itself is started by `servers.spark_connect` for the Connect test in
test_spark_cluster.py, which replays a dump through it and compares the snapshots.
"""

from __future__ import annotations

import os

import pytest

from cdc_assets.cli import main
from cdc_assets.common import spark_connect_server
from cdc_assets.common.jvm_archive import DRIVER_DEFAULT_JAVA_OPTIONS
from cdc_assets.common.settings import load_settings
from cdc_assets.common.spark_connect_server import SERVER_CLASS, listen_address, remote_url, server_command, server_env


def confs(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


def settings(tmp_path, **env):
    return load_settings({"CDC_ASSETS_HOME": str(tmp_path), "CDC_ASSETS_JVM_ARCHIVE": "none", **env})


def test_the_server_runs_spark_with_the_settings_of_a_local_run(tmp_path):
    argv = server_command(settings(tmp_path, CDC_ASSETS_SPARK_CONF="spark.driver.memory=1g,spark.sql.shuffle.partitions=3"),
                          "local[1]", "127.0.0.1", 15123)
    assert os.access(argv[0], os.X_OK) and argv[0].endswith("bin/spark-submit")
    assert argv[argv.index("--class") + 1] == SERVER_CLASS
    assert argv[argv.index("--master") + 1] == "local[1]"
    conf = confs(argv)
    # The settings a Connect client cannot send (not spark.sql.*) are the server's.
    assert conf["spark.driver.memory"] == "1g"
    assert conf["spark.hadoop.parquet.block.size"] == str(4 * 1024 * 1024)
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "15123"
    assert not {"spark.master", "spark.remote", "spark.app.name"} & conf.keys()
    assert DRIVER_DEFAULT_JAVA_OPTIONS not in conf  # archive turned off


def test_the_server_maps_the_class_archive_when_there_is_one(tmp_path):
    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"not checked here")
    conf = confs(server_command(settings(tmp_path, CDC_ASSETS_JVM_ARCHIVE=str(archive)), "local[2]"))
    assert conf[DRIVER_DEFAULT_JAVA_OPTIONS] == f"-XX:SharedArchiveFile={archive}"


def test_a_connect_url_is_not_a_master_for_the_server(tmp_path):
    with pytest.raises(ValueError, match="not 'sc://"):
        server_command(settings(tmp_path), "sc://127.0.0.1:15002")


def test_the_server_environment_runs_spark_not_a_connect_client(tmp_path):
    env = server_env({"SPARK_REMOTE": "sc://elsewhere:15002", "SPARK_DAEMON_MEMORY": "512m", "PATH": "/usr/bin"})
    assert "SPARK_REMOTE" not in env and env["SPARK_CONNECT_MODE"] == "0"
    assert "SPARK_DAEMON_MEMORY" not in env  # it would win over spark.driver.memory
    assert os.path.isdir(env["SPARK_HOME"]) and env["PATH"] == "/usr/bin"
    assert env["PYSPARK_PYTHON"]  # this interpreter, unless the user chose one
    assert server_env({"PYSPARK_PYTHON": "/opt/py"})["PYSPARK_PYTHON"] == "/opt/py"



@pytest.mark.parametrize(("remote", "address"), [
    ("sc://127.0.0.1:15099", ("127.0.0.1", 15099)),
    ("sc://spark-connect", ("spark-connect", 15002)),
    ("sc://spark-connect:15003/;token=abc", ("spark-connect", 15003)),
    ("sc://[::1]:15004", ("::1", 15004)),
])
def test_a_shell_pointed_at_a_server_starts_it_where_the_url_says(remote, address):
    assert listen_address(remote) == address


def test_the_printed_url_is_one_a_client_can_use():
    assert remote_url("127.0.0.1", 15002) == "sc://127.0.0.1:15002"
    assert remote_url("::1", 15004) == "sc://[::1]:15004"


def test_the_command_line_defaults_follow_the_shell(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(spark_connect_server, "run", lambda settings, *where: started.append(where))
    monkeypatch.setenv("CDC_ASSETS_HOME", str(tmp_path))
    monkeypatch.setenv("CDC_ASSETS_SPARK_MASTER", "sc://127.0.0.1:15099")
    assert main(["connect-server"]) == 0
    monkeypatch.setenv("CDC_ASSETS_SPARK_MASTER", "local[3]")
    assert main(["connect-server"]) == 0
    assert main(["connect-server", "--master", "local[1]", "--host", "0.0.0.0", "--port", "15100"]) == 0
    assert started == [("local[2]", "127.0.0.1", 15099), ("local[3]", "127.0.0.1", 15002),
                       ("local[1]", "0.0.0.0", 15100)]

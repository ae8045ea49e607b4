"""`cdc-assets connect-server`: a long-lived local Spark Connect server for Dagster runs.

Every run launched from the UI, a schedule or a sensor is a new process. With `local[N]` it
starts its own driver JVM, and that JVM's first jobs run before the JIT has compiled Spark's
hot paths: a small window's first run took 1.5–2 times as long as the next ones in the same
process. A Connect server stays up between runs, so runs that set
`CDC_ASSETS_SPARK_MASTER=sc://host:port` find its JVM and its Python workers warm
(docs/configuration.md has the figures).

The server runs Spark with the settings a local run would use (`spark_config`, so the user's
`CDC_ASSETS_SPARK_CONF` and the driver JVM's class archive too): a Connect client sends only
`spark.sql.*` settings, so the rest (Parquet row-group size, driver memory) must be the
server's. Its Python workers run this interpreter, which has cdc_assets installed; they keep
the code they imported, so restart the server after changing a decoder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from cdc_assets.common.settings import Settings
from cdc_assets.common.spark_session import is_spark_connect, spark_config

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 15002  # Spark Connect's own default
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# Settings of a client session, not of the server's JVM (`spark.api.mode=connect` would make
# spark-submit start a Connect client).
_CLIENT_ONLY = ("spark.master", "spark.app.name", "spark.remote", "spark.api.mode")
# Variables that would make spark-submit start a Connect client, or (the DAEMON ones, which
# the launcher applies to this server class) override the driver memory and options below.
_NOT_FOR_THE_SERVER = ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED",
                       "SPARK_DAEMON_MEMORY", "SPARK_DAEMON_JAVA_OPTS")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def server_command(settings: Settings, master: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> list[str]:
    """`spark-submit` of the Connect server in the foreground, its log on stderr."""
    if is_spark_connect(master):
        raise ValueError(f"the server runs Spark itself: give it local[N] or spark://host:port, not {master!r}")
    conf = {k: v for k, v in spark_config(settings.with_overrides(spark_master=master)).items()
            if k not in _CLIENT_ONLY}
    conf["spark.connect.grpc.binding.address"] = host
    conf["spark.connect.grpc.binding.port"] = str(port)
    argv = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
            "--name", "cdc_assets Spark Connect server", "--master", master]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv


def server_env(base: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _NOT_FOR_THE_SERVER}
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_CONNECT_MODE"] = "0"
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers need cdc_assets and pyarrow
    return env


def remote_url(host: str, port: int) -> str:
    return f"sc://[{host}]:{port}" if ":" in host else f"sc://{host}:{port}"


def listen_address(remote: str) -> tuple[str, int]:
    """Host and port of a Connect URL (`sc://host[:port][/;params]`), so that a shell whose
    runs point at `sc://127.0.0.1:15099` starts the server there."""
    hostport = remote.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    return host.strip("[]") or DEFAULT_HOST, int(port) if port else DEFAULT_PORT


def default_address(settings: Settings) -> tuple[str, str, int]:
    """(master, host, port) when the command line names none. A shell whose runs already
    point at a server (`CDC_ASSETS_SPARK_MASTER=sc://…`) starts that server, on local[2]."""
    if is_spark_connect(settings.spark_master):
        return ("local[2]", *listen_address(settings.spark_master))
    return settings.spark_master, DEFAULT_HOST, DEFAULT_PORT


def run(settings: Settings, master: str, host: str, port: int) -> None:
    """Replace this process with the server (Ctrl-C stops it)."""
    argv = server_command(settings, master, host, port)
    print(f"cdc-assets: Spark Connect server on {master}; runs use it with "
          f"CDC_ASSETS_SPARK_MASTER={remote_url(host, port)}", file=sys.stderr, flush=True)
    os.execve(argv[0], argv, server_env(os.environ))

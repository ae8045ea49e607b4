"""`cdc-assets jvm-archive`: write the driver JVM's class-data-sharing archive
(common/jvm_archive.py has what it is for and why a stale one is harmless).

A child process starts a session and runs a few small jobs of the kinds the pipeline runs,
on a driver JVM told to archive the classes it loaded when it exits. The child stops that
JVM and waits for it (the archive is written as it exits); the file is then moved into
place, so a reader never maps a half-written archive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cdc_assets.common.jvm_archive import (
    DRIVER_DEFAULT_JAVA_OPTIONS, default_archive_path, prepend_java_option, superseded_archives,
)

_TIMEOUT_S = 900
_JVM_EXIT_TIMEOUT_S = 300  # the child's wait for its JVM, well inside the parent's timeout


def build(target: Path | None = None) -> dict:
    """Write the archive to `target` (default: the virtual environment's); its path, size,
    the seconds it took and, for the default, the archives of other pyspark versions it
    removed from the virtual environment."""
    default = target is None
    target = (target or default_archive_path()).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*.partial"):  # left by a killed build
        stale.unlink(missing_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="cdc-jvm-archive-") as work:
            # Its own process group: on a failure or a timeout the JVM is killed with the
            # child, before it could write the archive after this clean-up.
            child = subprocess.Popen(
                [sys.executable, "-m", "cdc_assets.common.jvm_archive_build", str(partial), work],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            )
            try:
                _, err = child.communicate(timeout=_TIMEOUT_S)
            finally:
                _kill_group(child.pid)
        if child.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"the warm-up run did not write an archive (exit {child.returncode}): {err[-2000:]}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    removed = _remove(superseded_archives(target.parent, target.name)) if default else []
    return {"archive": str(target), "mb": round(target.stat().st_size / 2**20),
            "seconds": round(time.perf_counter() - started, 1), "removed": [str(p) for p in removed]}


def _remove(paths: list[Path]) -> list[Path]:
    """The files of `paths` this removed. One that cannot be removed stays, with a warning:
    it only costs disk, and the new archive is in place."""
    removed = []
    for path in paths:
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass  # removed by someone else meanwhile
        except OSError as exc:
            print(f"cdc-assets: could not remove the old archive {path}: {exc}", file=sys.stderr)
    return removed


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the child and its JVM have exited


def _warm_up(archive_at_exit: Path, work: Path) -> None:
    """The child: start a session as the pipeline does, run the kinds of jobs it runs on a
    little data (Parquet both ways, JSON, maps, a window, a join, an Arrow batch through
    Python, a cache), then stop the driver JVM and wait for it to exit."""
    from pyspark import SparkContext
    from pyspark.sql import Window, functions as F

    from cdc_assets.common.settings import load_settings
    from cdc_assets.common.spark_session import is_spark_connect, spark_config, start_spark_session

    settings = load_settings()
    if is_spark_connect(settings.spark_master):
        raise SystemExit("a Spark Connect client starts no driver JVM: no archive to write")
    conf = spark_config(settings.with_overrides(jvm_archive=None))  # it writes one, maps none
    # The heap size does not matter to the archive: a small one leaves room for other work.
    conf["spark.driver.memory"] = "1g"
    conf[DRIVER_DEFAULT_JAVA_OPTIONS] = prepend_java_option(
        f"-XX:ArchiveClassesAtExit={archive_at_exit}", conf.get(DRIVER_DEFAULT_JAVA_OPTIONS))
    spark = start_spark_session(conf)
    gateway = SparkContext._gateway
    if gateway.proc is None:
        raise SystemExit("this process joined a running JVM (PYSPARK_GATEWAY_PORT): it cannot write an archive")
    rows = spark.range(20_000).select(
        "id", (F.col("id") % 7).alias("k"),
        F.to_json(F.struct(F.col("id").alias("a"), F.lit("x").alias("b"))).alias("v"),
    )
    rows.write.parquet(str(work / "rows"))
    back = spark.read.parquet(str(work / "rows")).select(
        "id", "k", F.from_json("v", "a long, b string").alias("j"), F.create_map(F.lit("v"), "v").alias("m"))
    latest = back.withColumn("n", F.row_number().over(Window.partitionBy("k").orderBy(F.desc("id")))).where("n = 1")
    joined = latest.join(back.groupBy("k").agg(F.count(F.lit(1)).alias("c")), on="k", how="left")
    through_python = joined.mapInArrow(lambda batches: batches, joined.schema).persist()
    through_python.count()
    through_python.write.parquet(str(work / "out"))
    through_python.unpersist()
    spark.stop()
    # The JVM exits when its stdin closes, and writes the archive as it exits.
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=_JVM_EXIT_TIMEOUT_S)


if __name__ == "__main__":
    _warm_up(Path(sys.argv[1]), Path(sys.argv[2]))

"""`cdc-assets jvm-archive`: write the driver JVM's class-data-sharing archive
(lib/jvm_archive.py has what it is for and why a stale one is harmless).

A child process starts a session and runs a few small jobs of the kinds the pipeline runs,
on a driver JVM told to archive the classes it loaded when it exits. The child stops that
JVM and waits for it (the archive is written as it exits); the file is then moved into
place, so a reader never maps a half-written archive.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cdc_assets.lib.jvm_archive import ARCHIVE_VARIABLE, DRIVER_JAVA_OPTIONS, default_archive_path

_TIMEOUT_S = 900


def build(target: Path | None = None) -> dict:
    """Write the archive to `target` (default: the virtual environment's); its path, size
    and the seconds it took."""
    target = (target or default_archive_path()).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="cdc-jvm-archive-") as work:
            # The warm-up JVM writes an archive; it maps none.
            env = {**os.environ, ARCHIVE_VARIABLE: "none"}
            proc = subprocess.run(
                [sys.executable, "-m", "cdc_assets.jvm_archive", str(partial), work],
                env=env, capture_output=True, text=True, timeout=_TIMEOUT_S,
            )
        if proc.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"the warm-up run did not write an archive (exit {proc.returncode}): "
                               f"{proc.stderr[-2000:]}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return {"archive": str(target), "mb": round(target.stat().st_size / 2**20),
            "seconds": round(time.perf_counter() - started, 1)}


def _warm_up(archive_at_exit: Path, work: Path) -> None:
    """The child: start a session as the pipeline does, run the kinds of jobs it runs on a
    little data (Parquet both ways, JSON, maps, a window, a join, an Arrow batch through
    Python, a cache), then stop the driver JVM and wait for it to exit."""
    from pyspark import SparkContext
    from pyspark.sql import Window, functions as F

    from cdc_assets.defs.resources import spark_config, start_spark_session
    from cdc_assets.lib.parquet_write import parquet_writer
    from cdc_assets.lib.settings import load_settings

    settings = load_settings()
    if settings.spark_master.startswith("sc://"):
        raise SystemExit("a Spark Connect client starts no driver JVM: no archive to write")
    conf = spark_config(settings.with_overrides(jvm_archive=None))
    conf[DRIVER_JAVA_OPTIONS] = " ".join(
        o for o in (conf.get(DRIVER_JAVA_OPTIONS), f"-XX:ArchiveClassesAtExit={archive_at_exit}") if o)
    spark = start_spark_session(conf)
    rows = spark.range(20_000).select(
        "id", (F.col("id") % 7).alias("k"),
        F.to_json(F.struct(F.col("id").alias("a"), F.lit("x").alias("b"))).alias("v"),
    )
    parquet_writer(rows).parquet(str(work / "rows"))
    back = spark.read.parquet(str(work / "rows")).select(
        "id", "k", F.from_json("v", "a long, b string").alias("j"), F.create_map(F.lit("v"), "v").alias("m"))
    latest = back.withColumn("n", F.row_number().over(Window.partitionBy("k").orderBy(F.desc("id")))).where("n = 1")
    joined = latest.join(back.groupBy("k").agg(F.count(F.lit(1)).alias("c")), on="k", how="left")
    through_python = joined.mapInArrow(lambda batches: batches, joined.schema).persist()
    through_python.count()
    parquet_writer(through_python).parquet(str(work / "out"))
    through_python.unpersist()
    gateway = SparkContext._gateway
    spark.stop()
    # The JVM exits when its stdin closes, and writes the archive as it exits.
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=_TIMEOUT_S)


if __name__ == "__main__":
    _warm_up(Path(sys.argv[1]), Path(sys.argv[2]))

"""The measured workloads. Each runs in its own process (`python -m benchmarks.engines NAME
DUMP_ROOT WORK_DIR`), so peak memory covers exactly one engine (JVM included), and prints one
JSON line: `job_s` (the work, Spark session start excluded) and `session_s`.

Outputs that are table states go to `WORK_DIR/out/<db>.<table>.parquet` (DuckDB, plain
Spark) or to a cdc_assets warehouse of Iceberg tables (`warehouse_folder`);
`benchmarks.check` compares them with the dump's expected state.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.dump import TOPIC, DumpSpec, dump_tables, generate_dump

_SPARK_TYPES = {"BIGINT": "bigint", "INTEGER": "int", "VARCHAR": "string", "TIMESTAMP": "timestamp_ntz"}


def _spark_type(decl: str) -> str:
    return _SPARK_TYPES.get(decl, decl.lower())


def _dump_glob(dump: Path) -> str:
    return str(dump / "dump" / TOPIC / "*.parquet")


# --- no Spark ------------------------------------------------------------------------

def read_floor_arrow(dump: Path, work: Path) -> dict:
    """Read and decompress every message value once (the I/O + Parquet floor)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    t0 = time.perf_counter()
    total = 0
    for batch in ds.dataset(str(dump / "dump" / TOPIC), format="parquet").to_batches(columns=["value"]):
        total += pc.sum(pc.binary_length(batch.column(0))).as_py() or 0
    return {"job_s": time.perf_counter() - t0, "value_bytes": total}


def duckdb_sql(dump: Path, work: Path) -> dict:
    """The same reconstruction in SQL: parse, drop exact re-sent copies, latest version per
    key (at one commitTs a DELETE applies before an INSERT, as in cdc_assets), drop deletes,
    typed Parquet per table."""
    import duckdb

    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"""
        CREATE TEMP TABLE latest AS
        WITH msgs AS (
          SELECT json_transform(decode(value),
            '{{"database":"VARCHAR","table":"VARCHAR","pkNames":["VARCHAR"],"isDdl":"BOOLEAN",
               "type":"VARCHAR","data":["JSON"],"_tidb":{{"commitTs":"UBIGINT"}}}}') AS m
          FROM read_parquet('{_dump_glob(dump)}')
        ), rows AS (
          SELECT DISTINCT m.database AS db, m."table" AS tbl, m._tidb.commitTs AS ts, m.type AS op,
                 m.pkNames AS pk, unnest(m.data) AS row
          FROM msgs
          WHERE NOT coalesce(m.isDdl, false) AND m.type IN ('INSERT', 'UPDATE', 'DELETE')
        ), keyed AS (
          SELECT *, list_transform(pk, lambda n: json_extract_string(row, n)) AS k FROM rows
        )
        SELECT db, tbl, op, row FROM keyed
        QUALIFY row_number() OVER (PARTITION BY db, tbl, k ORDER BY ts DESC, (op = 'DELETE') ASC) = 1
    """)
    for t in dump_tables(dump):
        cols = ", ".join(
            f"CAST(json_extract_string(row, '{name}') AS {decl}) AS \"{name}\"" for name, _, decl, _, _ in t.columns
        )
        con.execute(
            f"COPY (SELECT {cols} FROM latest WHERE db = '{t.database}' AND tbl = '{t.table}' AND op <> 'DELETE') "
            f"TO '{out / (t.name + '.parquet')}' (FORMAT parquet)"
        )
    con.close()
    return {"job_s": time.perf_counter() - t0}


# --- Spark ---------------------------------------------------------------------------

def _spark():
    t0 = time.perf_counter()
    from cdc_assets.common.spark_session import spark_config, start_spark_session
    from cdc_assets.common.settings import load_settings

    spark = start_spark_session(spark_config(load_settings({})))
    spark.range(1).count()  # the JVM and the executor are up
    return spark, time.perf_counter() - t0


def read_floor_spark(dump: Path, work: Path) -> dict:
    from pyspark.sql import functions as F

    spark, session_s = _spark()
    t0 = time.perf_counter()
    total = spark.read.parquet(_dump_glob(dump)).agg(F.sum(F.length("value"))).first()[0]
    return {"job_s": time.perf_counter() - t0, "session_s": session_s, "value_bytes": int(total)}


def spark_naive(dump: Path, work: Path) -> dict:
    """What a plain PySpark user writes: `spark.read.json` (schema inferred) on the values,
    drop exact copies, a window per key, latest non-deleted version, typed Parquet."""
    from pyspark.sql import DataFrame, Window, functions as F

    spark, session_s = _spark()
    out, tables = work / "out", dump_tables(dump)
    t0 = time.perf_counter()
    values = spark.read.parquet(_dump_glob(dump)).select(F.col("value").cast("string"))
    as_strings = getattr(values._jdf, "as")(spark._jvm.org.apache.spark.sql.Encoders.STRING())
    msgs = DataFrame(spark._jsparkSession.read().json(as_strings), spark)
    rows = (
        msgs.where(~F.col("isDdl") & F.col("type").isin("INSERT", "UPDATE", "DELETE"))
        .select(F.col("database").alias("db"), F.col("table").alias("tbl"), F.col("_tidb.commitTs").alias("ts"),
                F.col("type").alias("op"), F.explode("data").alias("row"))
        .dropDuplicates()
    )
    key = F.lit(None).cast("string")
    for t in tables:
        key = F.when((F.col("db") == t.database) & (F.col("tbl") == t.table),
                     F.concat_ws("\x1f", *[F.col("row")[c] for c in t.pk])).otherwise(key)
    latest = Window.partitionBy("db", "tbl", key).orderBy(F.desc("ts"), (F.col("op") == "DELETE").asc())
    final = rows.withColumn("_rn", F.row_number().over(latest)).where("_rn = 1 AND op <> 'DELETE'").persist()
    for t in tables:
        final.where((F.col("db") == t.database) & (F.col("tbl") == t.table)).select(
            *[F.col("row")[name].cast(_spark_type(decl)).alias(name) for name, _, decl, _, _ in t.columns]
        ).write.mode("overwrite").parquet(str(out / (t.name + ".parquet")))
    return {"job_s": time.perf_counter() - t0, "session_s": session_s}


def _raw_messages(spark, dump: Path):
    from cdc_assets.landing.layouts.kafka_parquet import KafkaParquetLayout

    layout = KafkaParquetLayout()
    root = dump / "dump"
    return layout.read(spark, layout.list_files(root), root)


def cdc_decode(dump: Path, work: Path) -> dict:
    """cdc_assets' Canal-JSON decoder over every message, nothing written (noop sink)."""
    from cdc_assets.decode import get_decoder

    spark, session_s = _spark()
    t0 = time.perf_counter()
    get_decoder("canal-json").decode(_raw_messages(spark, dump)).write.format("noop").mode("overwrite").save()
    return {"job_s": time.perf_counter() - t0, "session_s": session_s}


def cdc_decode_protocol(dump: Path, work: Path) -> dict:
    """One protocol's decoder over its simulator dump (`benchmarks.protocols`), noop sink."""
    from pyspark.sql import functions as F

    from benchmarks.protocols import dump_info
    from cdc_assets.contracts.schemas import REJECT_REASON
    from cdc_assets.decode import get_decoder

    decoder, options = dump_info(dump)["decoder"]
    spark, session_s = _spark()
    t0 = time.perf_counter()
    get_decoder(decoder, options).decode(_raw_messages(spark, dump)).write.format("noop").mode("overwrite").save()
    job_s = time.perf_counter() - t0
    # Not timed: the answer's size, and proof that the dump decodes cleanly.
    counts = get_decoder(decoder, options).decode(_raw_messages(spark, dump)).agg(
        F.count("*").alias("events"), F.count(REJECT_REASON).alias("rejected")).first()
    return {"job_s": job_s, "session_s": session_s, "events": counts["events"], "rejected": counts["rejected"]}


def cdc_decode_to_parquet(dump: Path, work: Path) -> dict:
    """Decode and keep the change log (input of the align / snapshot steps)."""
    from pyspark.sql import functions as F

    from cdc_assets.contracts.schemas import CHANGE_LOG_COLUMNS, REJECT_REASON
    from cdc_assets.decode import get_decoder
    from benchmarks.parquet_write import parquet_writer

    spark, session_s = _spark()
    t0 = time.perf_counter()
    decoded = get_decoder("canal-json").decode(_raw_messages(spark, dump))
    parquet_writer(decoded.where(F.col(REJECT_REASON).isNull()).select(*CHANGE_LOG_COLUMNS)).mode(
        "overwrite").parquet(str(work / "change_log"))
    return {"job_s": time.perf_counter() - t0, "session_s": session_s}


def _align(spark, change_log):
    from pyspark.sql import functions as F

    from cdc_assets.align.change_table import aligned_events, mark_late_and_duplicates
    from cdc_assets.contracts.schemas import WATERMARK

    marks = change_log.where(F.col("event_kind") == WATERMARK).select(
        "topic", "kafka_partition", "kafka_offset", "watermark_ts")
    return aligned_events(mark_late_and_duplicates(change_log, marks, 0))


def cdc_align(dump: Path, work: Path) -> dict:
    """Late events and duplicates dropped (change_table), written as Parquet (as the IO manager does)."""
    from benchmarks.parquet_write import parquet_writer

    spark, session_s = _spark()
    t0 = time.perf_counter()
    parquet_writer(_align(spark, spark.read.parquet(str(work / "change_log")))).mode("overwrite").parquet(
        str(work / "change_table"))
    return {"job_s": time.perf_counter() - t0, "session_s": session_s}


BENCH_SOURCE = "bench"


def warehouse_folder(work: Path, engine: str) -> Path:
    """Where `engine` writes its snapshots (source `bench`): a warehouse (its catalog, every
    table) of its own, so runs and engines never share a catalog."""
    return work.absolute() / f"{engine}_warehouse"


def _fresh_warehouse(spark, work: Path, engine: str) -> None:
    """An empty warehouse for `engine` (its catalog too: it would name removed tables), which
    the session's catalog `cdc` then points at (benchmarks/warehouse.py)."""
    from benchmarks.warehouse import fresh_warehouse

    fresh_warehouse(spark, warehouse_folder(work, engine))


def _snapshot(spark, change_table, work: Path, engine: str) -> dict:
    from cdc_assets.snapshot.store import write_window_snapshot

    return write_window_snapshot(spark, change_table, warehouse_folder(work, engine), BENCH_SOURCE, 0, 1, None)


def cdc_snapshot(dump: Path, work: Path) -> dict:
    """The snapshot of the whole dump as one window, from the change table."""
    spark, session_s = _spark()
    _fresh_warehouse(spark, work, "cdc_snapshot")
    t0 = time.perf_counter()
    _snapshot(spark, spark.read.parquet(str(work / "change_table")), work, "cdc_snapshot")
    return {"job_s": time.perf_counter() - t0, "session_s": session_s}


def cdc_pipeline(dump: Path, work: Path) -> dict:
    """decode + align + snapshot in one Spark session, without Dagster (one window)."""
    from pyspark.sql import functions as F

    from cdc_assets.contracts.schemas import CHANGE_LOG_COLUMNS, REJECT_REASON
    from cdc_assets.decode import get_decoder

    spark, session_s = _spark()
    _fresh_warehouse(spark, work, "cdc_pipeline")
    t0 = time.perf_counter()
    decoded = get_decoder("canal-json").decode(_raw_messages(spark, dump))
    change_log = decoded.where(F.col(REJECT_REASON).isNull()).select(*CHANGE_LOG_COLUMNS).persist()
    try:
        _snapshot(spark, _align(spark, change_log), work, "cdc_pipeline")
    finally:
        change_log.unpersist()
    return {"job_s": time.perf_counter() - t0, "session_s": session_s}


def _replay(dump: Path, warehouse: Path, env: dict) -> dict:
    """`cdc-assets replay` of a benchmark dump in a child process; its JSON summary."""
    shutil.rmtree(warehouse, ignore_errors=True)
    cli = Path(sys.executable).with_name("cdc-assets")
    proc = subprocess.run(
        [str(cli), "replay", "--protocol", "canal-json", "--layout", "kafka-parquet",
         "--input", str(dump / "dump"), "--warehouse", str(warehouse), "--source", "bench"],
        capture_output=True, text=True, env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"replay failed ({proc.returncode}): {proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    keys = ("events", "duplicates", "late", "quarantined", "windows", "windows_with_data", "window_runs", "rows",
            "spark_jobs_per_window", "ok")
    return {k: summary.get(k) for k in keys}


def cdc_replay(dump: Path, work: Path) -> dict:
    """`cdc-assets replay` (Dagster, every window, checks on) in a child process; then the
    bytes of its warehouse by layer against the dump's (timed apart from the replay)."""
    t0 = time.perf_counter()
    summary = _replay(dump, work / "warehouse", _without_dagster_home())
    job_s = time.perf_counter() - t0
    return {"job_s": job_s, "replay": summary, "storage": storage(dump / "dump", work / "warehouse")}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def storage(dump_dir: Path, warehouse: Path) -> dict:
    """What a replay leaves on disk: the dump's bytes, the warehouse's (catalog file
    included) and each layer's, summed over its tables (`<layer>__<db>__<table>` tables
    count under their layer; data, metadata and files kept for tags and time travel all
    count)."""
    layers: dict[str, int] = {}
    for namespace in (p for p in warehouse.iterdir() if p.is_dir()):
        for table in (p for p in namespace.iterdir() if p.is_dir()):
            layer = table.name.split("__", 1)[0]
            layers[layer] = layers.get(layer, 0) + folder_bytes(table)
    return {"dump_bytes": folder_bytes(dump_dir), "warehouse_bytes": folder_bytes(warehouse),
            "layer_bytes": dict(sorted(layers.items(), key=lambda kv: -kv[1]))}


def cdc_replay_connect(dump: Path, work: Path) -> dict:
    """The same replay against a long-lived local Spark Connect server (`cdc-assets
    connect-server`), as Dagster runs launched from the UI or a schedule can use it. Not
    timed: the server's start (reported as the session start) and a warm-up replay of a
    20,000-event dump, so the timed run finds the server's JVM and Python workers warm."""
    from cdc_assets.common.spark_connect_server import remote_url
    from cdc_assets_tests.servers import LOOPBACK, free_port, wait_for_port

    port = free_port()
    cli = Path(sys.executable).with_name("cdc-assets")
    work.mkdir(parents=True, exist_ok=True)
    log_path = work / "connect-server.log"
    with log_path.open("wb") as log:
        # Not a session of its own: Ctrl-C of `make bench` reaches the server too. The CLI
        # execs spark-submit, which execs the JVM: the process is the server.
        server = subprocess.Popen([str(cli), "connect-server", "--port", str(port)], stdout=log,
                                  stderr=subprocess.STDOUT, env=_without_dagster_home())
    try:
        t0 = time.perf_counter()
        wait_for_port(port, server, log_path)
        session_s = time.perf_counter() - t0
        env = {**_without_dagster_home(), "CDC_ASSETS_SPARK_MASTER": remote_url(LOOPBACK, port)}
        _replay(generate_dump(DumpSpec(20_000), dump.parent).root, work / "warm_up", env)
        t1 = time.perf_counter()
        summary = _replay(dump, work / "warehouse", env)
        return {"job_s": time.perf_counter() - t1, "session_s": session_s, "replay": summary}
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _without_dagster_home() -> dict:
    """An ephemeral Dagster instance: no run history from earlier runs in the timing."""
    return {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}


ENGINES = {f.__name__: f for f in (
    read_floor_arrow, read_floor_spark, duckdb_sql, spark_naive, cdc_decode, cdc_decode_protocol,
    cdc_decode_to_parquet,
    cdc_align, cdc_snapshot, cdc_pipeline, cdc_replay, cdc_replay_connect,
)}


def main(argv: list[str]) -> None:
    name, dump, work = argv
    result = ENGINES[name](Path(dump), Path(work))
    print(json.dumps(result), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])

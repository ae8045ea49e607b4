"""BENCHMARKS.md, rewritten by every `make bench`."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from importlib.metadata import version

from benchmarks.measure import Measured
from cdc_assets.common.iceberg_arrow_writes import ARROW_WRITE_ROWS

STEPS = {
    "read_floor_arrow": "read floor: pyarrow reads and decompresses every value",
    "read_floor_spark": "read floor in Spark: `sum(length(value))` over the dump",
    "duckdb_sql": "DuckDB SQL: parse, dedup, latest per key, deletes dropped, typed Parquet",
    "spark_naive": "plain PySpark: `read.json` (inferred schema) + dedup + window, typed Parquet",
    "cdc_decode": "cdc_assets decode (Canal-JSON → change log + reject reasons), noop sink",
    "cdc_decode_to_parquet": "cdc_assets decode, change log written as Parquet (input of the next two)",
    "cdc_align": "cdc_assets dedup + align (late / duplicates dropped), change table Parquet",
    "cdc_snapshot": "cdc_assets snapshot (key actions, schema, typed reconstruct), one window",
    "cdc_pipeline": "cdc_assets decode + align + snapshot in one Spark session, no Dagster",
    "cdc_replay": "`cdc-assets replay` end to end through Dagster: land + every window, checks on",
    "cdc_replay_connect": "the same replay against a warm local Spark Connect server (`cdc-assets connect-server`; "
                          "its start and a 20,000-event warm-up replay not timed)",
}
# Issue 45's targets (2 cores).
TARGET_REPLAY_RATIO = 10.0  # end to end against the full-semantics DuckDB peer (long-term: 3×)
TARGET_JOBS_PER_WINDOW = 15
TARGET_FIXED_COST_S = 3.0  # a 5,000-event window on a warm JVM
TARGET_DECODE_CANAL_MPS = 250_000
TARGET_DECODE_OTHER_MPS = 100_000
TARGET_STORAGE_RATIO = 1.5  # the warehouse after a replay against the dump
TARGET_HISTORY_RATIO = 1.5


def _cmd(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine(load_at_start: tuple[float, float, float] | None = None) -> list[str]:
    """`load_at_start`: the load average before the first step (at report time the
    benchmark's own load is in it)."""
    import psutil

    before = load_at_start or os.getloadavg()
    load = ", ".join(f"{x:.1f}" for x in before)
    busy = before[0] > (os.cpu_count() or 1)
    return [
        f"- CPU: {_cpu_model()}, {os.cpu_count()} cores (`nproc`: {_cmd(['nproc'])}); "
        f"memory {psutil.virtual_memory().total / 2**30:.1f} GiB",
        f"- OS: {platform.platform()}; load average before the first step: {load}",
        f"- Python {platform.python_version()}; Java: {_cmd(['java', '-version'])}",
        f"- pyspark {version('pyspark')} (`local[2]`, driver memory 4g, the project's `spark_config`), "
        f"duckdb {version('duckdb')}, pyarrow {version('pyarrow')}, dagster {version('dagster')}",
        f"- Driver JVM class archive (`cdc-assets jvm-archive`, docs/configuration.md): {_jvm_archive()}",
        f"- Commit measured: `{_cmd(['git', 'rev-parse', '--short', 'HEAD'])}`",
        *(["- **The machine was busy before the run (load above the core count): every figure is slower and noisier "
           "than on a quiet machine, the JVM ones most.**"] if busy else []),
    ]


def _jvm_archive() -> str:
    from cdc_assets.common.jvm_archive import archive_in_place, configured_archive

    # Where the engines' `load_settings({})` looks.
    return "mapped by every session" if archive_in_place(configured_archive({})) else "none (sessions start without it)"


def _replay_jobs(m: Measured | None) -> list[int]:
    """Spark jobs per window of a measured `cdc_replay` (from its summary)."""
    return list(((m.extra.get("replay") or {}).get("spark_jobs_per_window") or []) if m else [])


def _fmt(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _rate(n: float, s: float) -> str:
    return "–" if not s else f"{n / s:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if not a or not b else f"{a / b:.2f}×"


def _answer(m: Measured) -> str:
    return {None: "–", True: "✓ expected", False: "✗ WRONG"}[m.correct]


def size_section(s: dict) -> list[str]:
    info, results = s["info"], s["results"]
    c = info["counts"]
    msgs, mb = c["messages"], c["value_bytes"] / 1e6
    duck = results.get("duckdb_sql")
    naive = results.get("spark_naive")
    width = info["spec"].get("width")
    title = (f"## Wide table: {s['events']:,} row events into one table of {width} columns" if width
             else f"## {s['events']:,} row events")
    lines = [
        title,
        "",
        *([WIDE_TABLE, ""] if width else []),
        f"Dump: {msgs:,} Kafka messages ({c['row_events']:,} row events, {c['duplicates']:,} duplicates, "
        f"{c['late']:,} late copies, {c['watermarks']:,} watermarks), {mb:,.0f} MB of message values, "
        f"{len(info['tables'])} table{'s' if len(info['tables']) != 1 else ''}, {info['spec']['hours']} hourly "
        f"windows; expected final state "
        f"{sum(c['expected_rows'].values()):,} rows.",
        "",
        "| step | runs | job s (median) | messages/s | MB/s | × DuckDB time | × plain Spark time "
        "| Spark session start s | peak RSS of the process tree MB | answer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in results.items():
        lines.append(
            f"| `{name}`: {STEPS[name]} | {len(m.runs)} | {_fmt(m.job_s)} | {_rate(msgs, m.job_s)} "
            f"| {_rate(mb, m.job_s)} | {_ratio(m.job_s, duck and duck.job_s)} "
            f"| {_ratio(m.job_s, naive and naive.job_s)} | {_fmt(m.session_s, 1)} | {m.peak_rss_mb:,.0f} "
            f"| {_answer(m)} |"
        )
    align, snap = results.get("cdc_align"), results.get("cdc_snapshot")
    if align and snap and duck:
        core = align.job_s + snap.job_s
        lines += ["", f"Snapshot core (dedup + align + reconstruct = `cdc_align` + `cdc_snapshot`): "
                      f"{core:.2f} s, {_ratio(core, duck.job_s)} DuckDB's whole reconstruction "
                      f"(which also parses the JSON)."]
    replay = results.get("cdc_replay")
    if replay:
        r = replay.extra.get("replay", {})
        lines += ["", f"`cdc-assets replay` summary: {r}."]
    return lines + [""]


def targets(sections: list[dict], history: dict | None, per_protocol: list[dict],
            table_size: dict | None = None, fixed_cost: dict | None = None) -> list[str]:
    first = sections[0]["results"] if sections else {}
    msgs = sections[0]["info"]["counts"]["messages"] if sections else 0
    rows = ["## Targets (2 cores)", "", "| target | measured | met |", "|---|---|---|"]

    def row(name: str, measured: str, ok: bool | None) -> None:
        rows.append(f"| {name} | {measured} | {'–' if ok is None else ('yes' if ok else '**no**')} |")

    duck, rep, warm = first.get("duckdb_sql"), first.get("cdc_replay"), first.get("cdc_replay_connect")
    if rep and duck:
        ratio = rep.job_s / duck.job_s
        on_server = f"; {warm.job_s / duck.job_s:.1f}× against a warm Connect server" if warm else ""
        row(f"1. end to end: `cdc-assets replay` of {sections[0]['events']:,} events within "
            f"{TARGET_REPLAY_RATIO:g}× the DuckDB peer (JVM start and every window included)",
            f"{rep.job_s:.1f} s against {duck.job_s:.2f} s: {ratio:.1f}×{on_server}", ratio <= TARGET_REPLAY_RATIO)
    jobs = _replay_jobs(rep) + ((fixed_cost or {}).get("spark_jobs") or [])
    # The larger sizes' replays count too: their windows are the ones that outgrow Arrow's writes.
    larger = [(s["events"], _replay_jobs(s["results"].get("cdc_replay"))) for s in sections[1:]]
    larger = [(events, n) for events, n in larger if n]
    if jobs:
        measured = f"{min(jobs)}–{max(jobs)} per window" + "".join(
            f"; {min(n)}–{max(n)} at {events:,} events (windows of about {events // len(n):,} events: a "
            f"table's window of more than {ARROW_WRITE_ROWS:,} events takes Spark's MERGE and history writes)"
            for events, n in larger)
        row(f"2. ≤ {TARGET_JOBS_PER_WINDOW} Spark jobs per window (the replays' windows)", measured,
            max(jobs + [m for _, n in larger for m in n]) <= TARGET_JOBS_PER_WINDOW)
    if fixed_cost and fixed_cost.get("warm_median") is not None:
        row(f"2. fixed cost ≤ {TARGET_FIXED_COST_S:g} s for a {fixed_cost['events_per_window']:,}-event window "
            "on a warm JVM (median of windows 2–" f"{fixed_cost['windows']})",
            f"{fixed_cost['warm_median']:.1f} s (window 1: {fixed_cost['first']:.1f} s)",
            fixed_cost["warm_median"] <= TARGET_FIXED_COST_S)
    summary = (rep.extra.get("replay") or {}) if rep else {}
    if summary.get("window_runs"):
        windows, runs = summary.get("windows_with_data", 0), summary["window_runs"]
        row("3. a backfill of N windows as one pass (one Dagster run over the range, `BackfillPolicy`)",
            f"{windows} windows with data in {runs} Dagster run(s) over their range; per range, the landed "
            "messages read, decoded and aligned once and the change rows read once for the snapshots (cached), "
            "then each window committed in order from those caches, its checks reported per partition "
            "(docs/performance.md §3)", runs == 1 and windows > 1)
    dec = first.get("cdc_decode")
    if dec:
        floor = first.get("read_floor_spark")
        context = f"; Spark reading the values alone (`read_floor_spark`): {msgs / floor.job_s:,.0f}/s" if floor else ""
        row(f"4. decode Canal-JSON ≥ {TARGET_DECODE_CANAL_MPS:,} messages/s (job time, {msgs:,} messages)",
            f"{msgs / dec.job_s:,.0f} messages/s{context}", msgs / dec.job_s >= TARGET_DECODE_CANAL_MPS)
    others = {p["protocol"]: p["info"]["counts"]["messages"] / p["measured"].job_s
              for p in per_protocol if p["measured"].runs and not p["protocol"].startswith("canal")}
    if others:
        row(f"4. decode ≥ {TARGET_DECODE_OTHER_MPS:,} messages/s for every other protocol (per-protocol table)",
            ", ".join(f"`{k}` {v:,.0f}/s" for k, v in others.items()), min(others.values()) >= TARGET_DECODE_OTHER_MPS)
    store = rep.extra.get("storage") if rep else None
    if store:
        ratio = store["warehouse_bytes"] / store["dump_bytes"]
        layers = ", ".join(f"{k} {v / store['dump_bytes']:.2f}×" for k, v in store["layer_bytes"].items())
        row(f"5. the warehouse ≤ {TARGET_STORAGE_RATIO:g}× the dump after the replay",
            f"{_mb(store['warehouse_bytes'])} against {_mb(store['dump_bytes'])}: {ratio:.2f}× ({layers})",
            ratio <= TARGET_STORAGE_RATIO)
    big = sections[-1]["results"].get("cdc_replay") if len(sections) > 1 else None
    if big:
        row(f"6. `cdc-assets replay` of {sections[-1]['events']:,} events, end to end, with its peak memory",
            f"{big.job_s:.1f} s, peak {big.peak_rss_mb:,.0f} MB (process tree)", None)
    if history and history.get("last"):
        r1 = history["last"] / history["first"]
        r2 = history["last"] / history["early_median"] if history.get("early_median") else None
        # Window 1 also pays the first Spark jobs of the JVM, so the steadier baseline decides.
        baseline_ok = (r2 if r2 is not None else r1) <= TARGET_HISTORY_RATIO
        row(f"6. window {history['windows']} ≤ {TARGET_HISTORY_RATIO}× window 1 (judged against windows 2–4)",
            f"{history['last']:.1f} s vs {history['first']:.1f} s ({r1:.2f}×); vs median of windows 2–4 "
            f"{_fmt(history.get('early_median'), 1)} s ({_ratio(history['last'], history.get('early_median'))})",
            baseline_ok)
    sizes = (table_size or {}).get("sizes") or []
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for workload, what in (("recent", "new and recent keys"), ("uniform", "keys all over the table")):
            a, b = small[f"merge_{workload}_s"], large[f"merge_{workload}_s"]
            peer_a, peer_b = small[f"whole_table_{workload}_s"], large[f"whole_table_{workload}_s"]
            row(f"a window's snapshot step ≤ {TARGET_HISTORY_RATIO}× from a {small['rows']:,}- to a "
                f"{large['rows']:,}-row table ({table_size['changes_per_window']:,} changes to {what})",
                f"{a:.1f} s → {b:.1f} s ({b / a:.2f}×); whole-table overwrite {peer_a:.1f} s → {peer_b:.1f} s "
                f"({peer_b / peer_a:.2f}×)", b / a <= TARGET_HISTORY_RATIO)
    if len(sections) > 1:
        for engine in ("cdc_decode", "duckdb_sql"):
            a = sections[0]["results"].get(engine)
            b = sections[-1]["results"].get(engine)
            if a and b:
                ratio = b.median_peak_rss_mb / a.median_peak_rss_mb
                row(f"peak memory flat from {sections[0]['events']:,} to {sections[-1]['events']:,} events "
                    f"(`{engine}`{'' if engine.startswith('cdc') else ', the peer, for reference'}; median of the runs' peaks)",
                    f"{a.median_peak_rss_mb:,.0f} MB → {b.median_peak_rss_mb:,.0f} MB ({ratio:.2f}×; "
                    f"{len(a.runs)} and {len(b.runs)} runs)",
                    ratio <= 1.25 if engine.startswith("cdc") else None)
    timed = {p["protocol"]: p["measured"].job_s for p in per_protocol}
    row("Open Protocol framing and DTS Avro decoding per Arrow batch (`mapInArrow`), not per-row UDFs",
        "by construction (`decode/open_protocol/events.py`, `decode/dts_avro/decoder.py`); timed under \"Decode alone, per protocol\""
        if {"open-protocol", "dts-avro"} <= set(timed) else "by construction (`decode/open_protocol/events.py`, `decode/dts_avro/decoder.py`)",
        True)
    return rows + [""]


def protocol_section(per_protocol: list[dict]) -> list[str]:
    if not per_protocol:
        return []
    lines = [
        "## Decode alone, per protocol",
        "",
        f"The simulator's workload ({per_protocol[0]['info']['counts']['row_changes']:,} row changes, demo "
        "tables with every common MySQL type) encoded in each protocol, Kafka-source Parquet; the "
        "protocol's decoder over its own dump, noop sink. Job time, Spark session start excluded.",
        "",
        "| protocol (decoder) | Kafka messages | events out | MB of values | runs | job s (median) "
        "| messages/s | events/s | MB/s | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in per_protocol:
        m, info = p["measured"], p["info"]
        msgs, mb, events = info["counts"]["messages"], info["value_bytes"] / 1e6, m.extra.get("events", 0)
        rejected = m.extra.get("rejected", 0)
        lines.append(
            f"| `{p['protocol']}` (`{info['decoder'][0]}`) | {msgs:,} | {events:,}"
            f"{f' ({rejected:,} rejected)' if rejected else ''} | {mb:,.0f} | {len(m.runs)} | {_fmt(m.job_s)} "
            f"| {_rate(msgs, m.job_s)} | {_rate(events, m.job_s)} | {_rate(mb, m.job_s)} | {m.peak_rss_mb:,.0f} |"
        )
    return lines + [""]


def history_section(history: dict | None, title: str = "Window cost against history") -> list[str]:
    if not history:
        return []
    secs = ", ".join(f"{s:.1f}" for s in history["seconds"])
    return [
        f"## {title}",
        "",
        f"`cdc-assets replay` of {history['windows']} hourly windows with {history['events_per_window']:,} row "
        f"events each (most of them insert new keys: the tables end with {history['final_rows']:,} rows). "
        f"The replay runs the windows as one Dagster run; seconds per window, from the Iceberg commit times "
        f"(its share of the decode-and-align step, window 1 with the range's shared decode pass, plus its "
        f"snapshot step), in order: {secs}. Total wall time {history['wall_s']:.0f} s."
        + (f" Spark jobs per window, in order: {', '.join(map(str, history['spark_jobs']))}."
           if history.get("spark_jobs") else ""),
        "",
    ]


def table_size_section(table_size: dict | None) -> list[str]:
    if not table_size:
        return []
    sizes = table_size["sizes"]
    largest = sizes[-1]["merge_recent_files"]
    every_file = all(r[f"whole_table_{w}_files"]["rewritten"] == r[f"whole_table_{w}_files"]["before"]
                     for r in sizes for w in ("recent", "uniform"))
    lines = [
        "## Window cost against table size (snapshot step)",
        "",
        f"One window of {table_size['changes_per_window']:,} changes applied to one Iceberg table of growing "
        "size (`benchmarks/window_cost.py`). The table is unpartitioned and written sorted by its key (Iceberg's "
        "`WRITE ORDERED BY`; Spark range-distributes the rows), so each data file holds one range of keys. Its "
        f"writes roll to a new file at {table_size['target_file_bytes'] / 2**20:g} MiB "
        "(`write.target-file-size-bytes`, set on the benchmark's tables far below Iceberg's default, so that "
        "they hold several files, as much larger tables do with the default): the MERGE's "
        f"{sizes[-1]['rows']:,}-row table is {largest['before']:,} files of "
        f"{_mb(largest['bytes_before'])} in all, {sizes[-1]['rows'] // max(1, largest['before']):,} rows per file "
        "on average. The window is written as a MERGE of the keys it touched, as cdc_assets does (one "
        "copy-on-write commit: the data files that hold a touched key are rewritten, the others are kept), "
        "and, as the peer in the same process, as an overwrite of the whole table"
        f"{', which rewrote every file at every size' if every_file else ''}. Seconds per window (median "
        f"of {table_size.get('runs', 3)} after a warm-up window per size and workload, and a warm-up pass of "
        "the whole step on a small table first), the window's uniqueness check included. Files rewritten: "
        "the data files the MERGE's snapshot deleted, of those the table had before it (its Iceberg snapshot "
        f"summary). `recent` (AUTO_INCREMENT tables): {table_size['recent_inserts']:,} inserts of new increasing "
        f"keys and {table_size['recent_updates']:,} updates spread over the newest {table_size['recent_keys']:,} "
        "keys (over every key of a smaller table); `uniform` (AUTO_RANDOM or UUID keys): "
        f"{table_size['changes_per_window']:,} updates spread over the whole key space.",
        "",
        "| table rows | MERGE's table: data files (size) | `recent`: MERGE files rewritten | `recent` MERGE s "
        "| whole table s | `uniform`: MERGE files rewritten | `uniform` MERGE s | whole table s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sizes:
        rec, uni = r["merge_recent_files"], r["merge_uniform_files"]
        lines.append(f"| {r['rows']:,} | {rec['before']:,} ({_mb(rec['bytes_before'])}) | "
                     f"{rec['rewritten']:,} of {rec['before']:,} | {r['merge_recent_s']:.2f} | "
                     f"{r['whole_table_recent_s']:.2f} | {uni['rewritten']:,} of {uni['before']:,} | "
                     f"{r['merge_uniform_s']:.2f} | {r['whole_table_uniform_s']:.2f} |")
    return lines + [""]


BASELINE = Path(__file__).with_name("baseline_before_iceberg.json")


def before_after_section(sections: list[dict], history: dict | None, table_size: dict | None,
                         baseline_file: Path = BASELINE) -> list[str]:
    """This run's figures next to the last run before the Iceberg warehouse (issue 43):
    the same steps and workloads, the figures of that run kept in `baseline_before_iceberg.json`."""
    before = json.loads(baseline_file.read_text())
    rows: list[tuple[str, float | None, float | None]] = []
    one_m = next((s["results"] for s in sections if s["events"] == before["events"]), {})
    for step, was in before["steps_job_s"].items():
        now = one_m.get(step)
        rows.append((f"`{step}`, {before['events']:,} events (job s)", was, now.job_s if now else None))
    if history and history.get("last"):
        h = before["history"]
        rows += [(f"history: window 1 of {h['windows']} (s)", h["first"], history["first"]),
                 ("history: median of windows 2–4 (s)", h["early_median"], history.get("early_median")),
                 (f"history: window {h['windows']} (s)", h["last"], history["last"]),
                 ("history: whole replay (wall s)", h["wall_s"], history["wall_s"])]
    now_sizes = {r["rows"]: r for r in (table_size or {}).get("sizes", [])}
    for was in before["table_size"]["sizes"]:
        now = now_sizes.get(was["rows"])
        for workload in ("recent", "uniform"):
            rows.append((f"window on a {was['rows']:,}-row table, `{workload}`: written window (s)",
                         was[f"{workload}_s"], now and now[f"merge_{workload}_s"]))
            rows.append((f"window on a {was['rows']:,}-row table, `{workload}`: whole-table peer (s)",
                         was[f"{workload}_whole_s"], now and now[f"whole_table_{workload}_s"]))
    lines = [
        "## Before and after the Iceberg warehouse",
        "",
        f"Before: {before['what']}. After: this run. The written window was a rewrite of the key ranges "
        "a window touched before, and is one Iceberg MERGE of the touched keys after. A dash: not measured "
        "in this run.",
        "",
        "| figure | before | after | after / before |",
        "|---|---|---|---|",
    ]
    for name, was, now in rows:
        lines.append(f"| {name} | {_fmt(was)} | {_fmt(now)} | {_ratio(now, was)} |")
    return lines + [""]


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


NOTES = """## How to read this

- **Events/s** counts every Kafka message of the dump (row events, re-sent copies and
  watermarks) divided by the step's job time. Job times exclude the Spark session start,
  which is listed separately; `cdc_replay` is wall time of the whole CLI process (JVM start,
  landing, every window). `cdc_replay_connect` is the wall time of the same CLI process
  against a local Spark Connect server that has already run a small replay; its "session
  start" column is the server's start, and its peak RSS includes the server (JVM and Python
  workers) and that warm-up.
- **Peak RSS** is sampled every 50 ms over the engine's whole process tree: the Python
  driver, the JVM and any Python workers. Spark's JVM is started with `spark.driver.memory=4g`,
  so its RSS follows its heap size more than the data. The tables list the highest peak of a
  step's runs.
- **Answer**: every engine that produces table states is checked against the generator's
  expected final state: row count and an order-independent checksum per table (DuckDB
  `hash` over the values cast to the declared types). A ✗ makes `make bench` exit 1.
- All engines read the same files: Spark's Kafka-source Parquet layout (`key`, `value`,
  `topic`, `partition`, `offset`, `timestamp`), generated by `benchmarks/dump.py` (seeded,
  cached under `.bench_cache/`).
- DuckDB and plain Spark are told the tables' column types and keys; cdc_assets discovers
  them from the messages (`mysqlType`, `pkNames`) and also computes reject reasons, lineage,
  the late-event rule, decimal scales and the checks, so the ratios overstate the cost of
  the same work somewhat.
- Ties at the same commitTs for one key: DuckDB and plain Spark order them as cdc_assets does
  (a DELETE applies before an INSERT, so the INSERT wins: TiCDC's split update). The generated
  dumps have no such ties, so this choice does not affect the figures.
- Figures are medians of the runs listed. `--budget-minutes` (default 110, which holds the 10,000,000-event steps on 2 cores) drops repeat runs,
  then the wide table, the per-protocol decode, the table-size test, the window-cost test and the
  larger-size steps (in that order), when a slow machine would overrun it;
  the machine section lists what was dropped. A machine loaded before the run (see the
  load average above) makes every figure slower and noisier, the JVM ones most.
"""


def render(sections: list[dict], history: dict | None, *, command: str, total_s: float,
           skipped: list[str] | None = None, per_protocol: list[dict] | None = None,
           load_at_start: tuple[float, float, float] | None = None, table_size: dict | None = None,
           fixed_cost: dict | None = None, wide: dict | None = None) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (benchmarks/); do not edit by hand.",
        "",
        "## Machine and command",
        "",
        *machine(load_at_start),
        f"- Command: `{command}`; the whole run took {total_s / 60:.1f} min.",
        *([f"- Skipped to stay within the time budget: {', '.join(skipped)}."] if skipped else []),
        "",
    ]
    lines += targets(sections, history, per_protocol or [], table_size, fixed_cost)
    for s in sections:
        lines += size_section(s)
    lines += protocol_section(per_protocol or [])
    lines += history_section(history)
    lines += history_section(fixed_cost, "Fixed cost of a small window")
    lines += table_size_section(table_size)
    lines += size_section(wide) if wide else []
    lines += before_after_section(sections, history, table_size)
    return "\n".join(lines) + "\n" + NOTES + "\n" + GAPS


WIDE_TABLE = (
    "A workload of wide rows: every value of every column is typed (after the sort of its key's "
    "actions) and written, once per column. The four tables above have 3-5 columns; change-data capture of "
    "real schemas often has dozens. Decimal, datetime, text with escapes and NULLs cycle over the columns.")

GAPS = """## Why targets are missed, and what would close the gap

docs/performance.md lists every Spark action of a window, with the plan that removes it.

- **Spark jobs and the fixed cost of a window (target 2).** No count, check figure or chart
  runs a job of its own (they are observed by the writes), and a range of windows is decoded
  and aligned in one pass, so what is left per window is its writes. A table whose window has
  at most 250,000 events (`ARROW_WRITE_ROWS`) is applied in Arrow: its typed actions are
  collected by one Spark action (2 jobs: the sort's shuffle and the result), and its snapshot
  and history are committed by pyiceberg, also in a new table's first window
  (docs/performance.md steps 25-26 and 29). So every window of the replays of 1,000,000
  events and fewer takes 7-14 jobs (the 1,000,000-event replay: about 62,000 events a table;
  before step 29 they took Spark's writes, about 10 jobs a table, hence 40). The
  10,000,000-event replay's windows (about 625,000 events a table) are over that bound: each
  table's MERGE and history are Spark's writes, about 24 jobs a table (adaptive execution
  runs each exchange as a job), hence 95-96 a window. Taking them through Arrow would hold a
  few hundred MB of typed actions a table in the driver; not tried. The fixed cost of a
  5,000-event window is then mostly driver time, not jobs: building each table's typed-action
  plans over py4j (a round trip per column function, about 0.4 s a table), the pyiceberg
  commits and catalog reads, the window's change-table write and Dagster's reporting. A
  vectorised apply of the typed actions (one plan for every table of the window) is what
  would cut it further.
- **End to end (target 1).** The replay of the 1,000,000-event dump is its landing (the dump
  read and kept as landed messages, with its watermark and batch figures: about a fifth of
  the time), one pass that decodes and aligns its four windows (about half: the Python
  decoder per message, and the alignment's sort), and the snapshot stage (a schema pre-pass,
  then each window's typed sort of each table's actions and its writes: about a third).
  DuckDB does the same reconstruction in one vectorised pass over parsed columns: the decoder
  (target 4) and the landing's second copy of the bytes are what would have to go first.
- **Decode (target 4).** Canal-JSON, CloudCanal and Debezium are parsed once per message with
  orjson (Debezium: the standard library, to keep every number's digits) inside `mapInArrow`;
  about 12-14 µs per message in one Python process, on two cores that Spark's JVM also uses
  to read the Parquet and move the Arrow batches. Spark only reading the values runs at about
  220,000-290,000 messages/s here (`read_floor_spark`), so 250,000/s leaves no time to parse:
  it needs a parser that makes no Python object per message (Arrow's C++ JSON reader was
  slower than orjson and has no map type; DuckDB's JSON functions inside the workers were not
  tried). Spark's `from_json` into per-message maps, the earlier decoder, ran at about 50,000
  messages/s. Open Protocol batches about 13 events per message: its events/s is the figure to
  compare. DTS Avro reads the decoded events twice for the type of a NULL value.
- **Window cost against table size.** A table's snapshot is an unpartitioned Iceberg table
  written sorted by its primary key (`WRITE ORDERED BY`), so each data file holds one range of
  keys, and a window in which only rows changed is one copy-on-write MERGE of the keys it
  touched: Iceberg rewrites the files that hold one of those keys. Keys that cluster at the end
  of the key space (`recent`) rewrite the same few files at every size; keys drawn over the
  whole key space (`uniform`) rewrite nearly every file, which is copy-on-write's cost
  (merge-on-read would move it to the readers). Until the commit after `0d4a098` this step also
  timed a scan of the whole table for duplicate keys, which the snapshots asset has not run for
  a MERGE window since issue 45 (one source row per key is observed on the MERGE's source); the
  step now checks uniqueness as the asset does.
- **Memory.** Spark's RSS is mostly the JVM heap (`spark.driver.memory=4g`), which the JVM
  grows lazily up to its limit; it does not hold the dump in memory (decode streams through
  Parquet batches), so peak RSS is bounded by the heap setting rather than by the dump size,
  and where it lands below that bound varies from run to run. So the memory step runs three
  times at every size and the target compares the median of the runs' peaks (the tables list
  the highest).
"""

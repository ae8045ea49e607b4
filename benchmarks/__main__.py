"""`python -m benchmarks` (what `make bench` runs): generate the dumps, measure every engine
on the same files, check that every engine gives the expected answer, rewrite BENCHMARKS.md.

    python -m benchmarks [--events 1000000,10000000] [--runs 3] [--large-runs 1]
                         [--history-windows 25] [--table-sizes 250000,1000000,4000000]
                         [--wide-table 100000x60] [--cache .bench_cache] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from benchmarks import check, report
from benchmarks.dump import DumpSpec, dump_tables, generate_dump
from benchmarks.engines import BENCH_SOURCE, warehouse_folder
from benchmarks.history import FIXED_COST_EVENTS, FIXED_COST_WINDOWS, measure_history
from benchmarks.measure import Measured, run_engine
from benchmarks.protocols import dump_info, protocol_dump, protocols
from benchmarks.window_cost import measure_in_child as measure_table_sizes

REPO = Path(__file__).resolve().parents[1]
# Engines per dump size. The first size runs all; larger sizes only what stays within the
# time budget (the JVM's plain `read.json` and Dagster runs grow linearly and are covered
# at the first size).
FULL = ["read_floor_arrow", "read_floor_spark", "duckdb_sql", "spark_naive", "cdc_decode",
        "cdc_decode_to_parquet", "cdc_align", "cdc_snapshot", "cdc_pipeline", "cdc_replay", "cdc_replay_connect"]
# the memory target's step first; the replay last (issue 45's 10M-event replay: the budget may drop it)
LARGE = ["cdc_decode", "read_floor_arrow", "duckdb_sql", "cdc_replay"]
# The memory target's step runs this often at every size: one run's peak is too noisy to judge.
MEMORY_STEP, MEMORY_RUNS = "cdc_decode", 3
SINGLE_RUN = {"cdc_decode_to_parquet"}  # prepares the align / snapshot input
# One table of many columns: every value is typed (after the sort of its key's actions) and written, per column.
WIDE = ["duckdb_sql", "spark_naive", "cdc_replay"]


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _answer(engine: str, dump_root: Path, work: Path) -> check.Fingerprint | None:
    tables = dump_tables(dump_root)
    if engine in ("duckdb_sql", "spark_naive"):
        return check.fingerprint_files(work / "out", tables)
    if engine in ("cdc_snapshot", "cdc_pipeline"):
        return check.fingerprint_snapshots(warehouse_folder(work, engine), BENCH_SOURCE, tables)
    if engine in ("cdc_replay", "cdc_replay_connect"):
        return check.fingerprint_snapshots(work / "warehouse", BENCH_SOURCE, tables)
    return None


class Budget:
    """Keeps `make bench` within its time budget on a slow or busy machine: repeat runs are
    dropped first, then whole steps (the report lists both). Steps run in the order of what
    the targets need: the first size, the larger sizes (memory against size), the
    window-cost tests (history, table size), the per-protocol decode, the wide table. Once a step is
    skipped every later one is, so a slow machine loses the end of that list, never its
    middle."""

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.started = time.perf_counter()
        self.skipped: list[str] = []
        self.closed = False

    def used(self) -> float:
        return (time.perf_counter() - self.started) / self.seconds

    def allows(self, share: float) -> bool:
        """Whether a repeat run still fits."""
        return self.used() < share

    def starts(self, share: float, step: str) -> bool:
        """Whether a step still fits; a skipped step closes the budget for every later one."""
        if self.closed or self.used() >= share:
            self.closed = True
            self.skipped.append(step)
            return False
        return True


def bench_size(spec: DumpSpec, runs: int, engines: list[str], cache: Path,
               budget: Budget, first: bool, share: float = 0.7) -> dict:
    events = spec.events
    t0 = time.perf_counter()
    dump = generate_dump(spec, cache)
    _log(f"{events:,} events: dump ready in {time.perf_counter() - t0:.1f}s at {dump.root}")
    want = check.expected(dump.root)
    work = cache / "work" / dump.spec.folder_name
    shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Measured] = {}
    for engine in engines:
        wide = f" into {spec.width} columns" if spec.width else ""
        if not first and not budget.starts(share, f"`{engine}` at {events:,} events{wide}"):
            _log(f"  {engine}: skipped, time budget")
            continue
        n = 1 if engine in SINGLE_RUN else max(runs, MEMORY_RUNS) if engine == MEMORY_STEP else runs
        m = Measured(engine, [])
        for i in range(n):
            if i and not budget.allows(0.45 if first else share):
                _log(f"  {engine}: {i} run(s) only, time budget")
                break
            m.runs.append(run_engine(engine, dump.root, work))
            if i == 0:
                got = _answer(engine, dump.root, work)
                m.correct = None if got is None else got == want
                if m.correct is False:
                    _log(f"  {engine}: WRONG ANSWER {got} != {want}")
            _log(f"  {engine} run {i + 1}/{n}: job {m.runs[-1].job_s:.2f}s, wall {m.runs[-1].wall_s:.1f}s, "
                 f"peak {m.runs[-1].peak_rss_mb:.0f} MB")
        results[engine] = m
    shutil.rmtree(work, ignore_errors=True)
    ordered = {e: results[e] for e in FULL if e in results}  # the report's row order (FULL lists WIDE's engines too)
    return {"events": events, "info": dump.info, "results": ordered}


def bench_protocols(row_changes: int, runs: int, cache: Path, seed: int, budget: Budget) -> list[dict]:
    """Decode alone, per protocol, each over its own simulator dump."""
    out = []
    for protocol in protocols():
        if not budget.starts(0.88, f"decode of `{protocol}`"):
            continue
        root = protocol_dump(protocol, cache, seed, row_changes)
        m = Measured("cdc_decode_protocol", [])
        for i in range(runs):
            if i and not budget.allows(0.8):
                break
            m.runs.append(run_engine("cdc_decode_protocol", root, cache / "work" / "protocol"))
        _log(f"  decode {protocol}: job {m.job_s:.2f}s over {m.runs[-1].extra.get('events'):,} events")
        out.append({"protocol": protocol, "info": dump_info(root), "measured": m})
    return out


def _wide_table(text: str) -> tuple[int, int] | None:
    """`EVENTSxCOLUMNS` (e.g. `100000x60`) -> (events, columns); '' -> None (the step is skipped).
    Read with the other arguments, so a typo stops the run before an hour of measuring."""
    if not text.strip():
        return None
    try:
        events, width = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not EVENTSxCOLUMNS, e.g. 100000x60") from None
    if events <= 0 or width < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: needs events > 0 and at least 2 columns (a key and a value)")
    return events, width


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks")
    p.add_argument("--events", default="1000000,10000000", help="comma-separated dump sizes")
    p.add_argument("--runs", type=int, default=3, help="runs per engine at the first size (median)")
    p.add_argument("--large-runs", type=int, default=1, help="runs per engine at larger sizes")
    p.add_argument("--history-windows", type=int, default=25, help="0 skips the window-cost test")
    p.add_argument("--table-sizes", default="250000,1000000,4000000",
                   help="table rows for the window-cost-against-table-size step ('' skips it)")
    p.add_argument("--protocol-changes", type=int, default=100_000,
                   help="row changes per protocol in the decode-per-protocol step (0 skips it)")
    p.add_argument("--wide-table", default="100000x60", type=_wide_table,
                   help="EVENTSxCOLUMNS: the replay of one wide table against the peers ('' skips it)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--budget-minutes", type=float, default=110,
                   help="drop repeat runs, then the wide table, the per-protocol decode, the table-size and "
                        "history tests and the larger sizes, to stay near it")
    p.add_argument("--cache", default=str(REPO / ".bench_cache"))
    p.add_argument("--out", default=str(REPO / "BENCHMARKS.md"))
    p.add_argument("--command", default="make bench", help="the command to print in the report")
    args = p.parse_args(argv)
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    budget = Budget(args.budget_minutes)
    cache = Path(args.cache)
    sizes = [int(s) for s in args.events.split(",") if s]
    # The first size with every step, then the larger sizes (memory against size), the
    # window-cost tests (history, then table size), the per-protocol decode and the wide table: the budget
    # drops from the end. On a clean clone the dumps are generated inside the budget too
    # (the 10M one takes about 100 s).
    sections = [bench_size(DumpSpec(sizes[0], seed=args.seed), args.runs, FULL, cache, budget, first=True)]
    # A few minutes at most: small windows on a warm JVM, what a window costs beyond its data.
    _log(f"fixed cost: {FIXED_COST_WINDOWS} windows of {FIXED_COST_EVENTS:,} events")
    fixed_cost = measure_history(FIXED_COST_WINDOWS, cache, args.seed, FIXED_COST_EVENTS)
    for events in sizes[1:]:
        sections.append(bench_size(DumpSpec(events, seed=args.seed), args.large_runs, LARGE, cache, budget,
                                   first=False))
    history = None
    if args.history_windows and budget.starts(0.75, f"the window-cost test ({args.history_windows} windows)"):
        _log(f"window cost vs history: {args.history_windows} windows")
        history = measure_history(args.history_windows, cache, args.seed)
    table_size = None
    if args.table_sizes and budget.starts(0.8, f"the table-size test ({args.table_sizes} rows)"):
        _log(f"window cost vs table size: {args.table_sizes} rows")
        table_size = measure_table_sizes(args.table_sizes, args.runs)
    per_protocol = []
    if args.protocol_changes:
        _log(f"decode per protocol: {args.protocol_changes:,} row changes each")
        per_protocol = bench_protocols(args.protocol_changes, args.runs, cache, args.seed, budget)
    wide = None
    if args.wide_table:
        events, width = args.wide_table
        if budget.starts(0.9, f"the wide-table replay ({events:,} events, {width} columns)"):
            _log(f"wide table: {events:,} events into {width} columns")
            wide = bench_size(DumpSpec(events, seed=args.seed, width=width), 1, WIDE, cache, budget, first=False,
                              share=0.95)
    total_s = time.perf_counter() - started
    text = report.render(sections, history, command=args.command, total_s=total_s, skipped=budget.skipped,
                         per_protocol=per_protocol, load_at_start=load_at_start, table_size=table_size,
                         fixed_cost=fixed_cost, wide=wide)
    Path(args.out).write_text(text)
    _log(f"wrote {args.out} in {total_s / 60:.1f} min")
    checked = sections + ([wide] if wide else [])
    wrong = [m.engine for s in checked for m in s["results"].values() if m.correct is False]
    if wrong:
        _log(f"wrong answers: {', '.join(wrong)}")
        return 1
    print(json.dumps({"total_s": round(total_s, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

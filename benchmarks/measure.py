"""Run one engine in a child process and sample the memory of its whole process tree."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SAMPLE_S = 0.05


@dataclass
class Run:
    job_s: float
    wall_s: float
    peak_rss_mb: float
    session_s: float | None = None
    extra: dict = field(default_factory=dict)


def _tree_rss(proc: psutil.Process) -> int:
    """RSS of a process and all its descendants (the JVM and Python workers included)."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def run_engine(name: str, dump_root: Path, work: Path) -> Run:
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "benchmarks.engines", name, str(dump_root), str(work)]
    t0 = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        cwd=Path(__file__).resolve().parents[1])
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc))
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed ({proc.returncode}):\n{err[-4000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    job_s = result.pop("job_s")
    session_s = result.pop("session_s", None)
    return Run(job_s, wall, peak / 2**20, session_s, result)


@dataclass
class Measured:
    engine: str
    runs: list[Run]
    correct: bool | None = None  # None: the engine produces no table state

    @property
    def job_s(self) -> float:
        return statistics.median(r.job_s for r in self.runs)

    @property
    def wall_s(self) -> float:
        return statistics.median(r.wall_s for r in self.runs)

    @property
    def session_s(self) -> float | None:
        s = [r.session_s for r in self.runs if r.session_s is not None]
        return statistics.median(s) if s else None

    @property
    def peak_rss_mb(self) -> float:
        return max(r.peak_rss_mb for r in self.runs)

    @property
    def median_peak_rss_mb(self) -> float:
        """Where the JVM's lazily grown heap peaks varies from run to run: targets compare this."""
        return statistics.median(r.peak_rss_mb for r in self.runs)

    @property
    def extra(self) -> dict:
        return self.runs[-1].extra

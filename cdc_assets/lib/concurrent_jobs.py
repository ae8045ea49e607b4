"""Independent Spark actions submitted from a few driver threads at once.

A window writes a handful of small tables, each a few short Spark jobs. Run one after
another, most of their time is the driver planning and scheduling while the cores wait;
submitted from several threads, one table's planning overlaps another's tasks. Spark's
scheduler takes jobs from many threads (PySpark pins each Python thread to a JVM thread),
local mode and Spark Connect alike.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

R = TypeVar("R")

MAX_THREADS = 4


def run_concurrently(tasks: list[Callable[[], R]], max_threads: int = MAX_THREADS) -> list[R]:
    """Each task's result, in the order given. Every task runs to its end even when one
    fails (none is left writing behind the caller's back); then the first failure is raised."""
    if len(tasks) <= 1 or max_threads <= 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=min(max_threads, len(tasks)), thread_name_prefix="cdc-spark") as pool:
        futures = [pool.submit(task) for task in tasks]
    return [f.result() for f in futures]  # the pool has waited for all of them

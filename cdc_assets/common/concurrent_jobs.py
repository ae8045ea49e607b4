"""Independent Spark actions submitted from a few driver threads at once.

A window writes a handful of small tables, each a few short Spark jobs. Run one after
another, most of their time is the driver planning and scheduling while the cores wait;
submitted from several threads, one table's planning overlaps another's tasks. Spark's
scheduler takes jobs from many threads (PySpark pins each Python thread to a JVM thread),
local mode and Spark Connect alike.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, TypeVar

R = TypeVar("R")

MAX_THREADS = 4


def run_concurrently(tasks: list[Callable[[], R]], max_threads: int = MAX_THREADS) -> list[R]:
    """Each task's result, in the order given.

    No task is left running behind the caller's back (its locks and caches are released
    after this returns): on a failure every task still runs to its end, and on an interrupt
    (a run terminated from the UI) the queued tasks are cancelled and the running ones
    awaited. Then the first failure in task order is raised, with the others as notes."""
    if len(tasks) <= 1 or max_threads <= 1:
        return [task() for task in tasks]
    pool = ThreadPoolExecutor(max_workers=min(max_threads, len(tasks)), thread_name_prefix="cdc-spark")
    futures = [pool.submit(task) for task in tasks]
    try:
        wait(futures)
    except BaseException:
        for f in futures:
            f.cancel()
        wait(futures)
        raise
    finally:
        pool.shutdown(wait=True)
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        for other in errors[1:]:
            errors[0].add_note(f"another concurrent task also failed: {other!r}")
        raise errors[0]
    return [f.result() for f in futures]

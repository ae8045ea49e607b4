"""A failure while one table is built names that table, and stays that table's.

Spark's message alone names a column, not the table. A window builds its tables side by
side: one that fails (`TableFailed`) keeps its previous snapshot, marked failed, and the
others are built and committed (`window_state.WindowResult.failed`, snapshot/store.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

R = TypeVar("R")


class TableFailed(RuntimeError):
    """One table could not be built or written; the cause is chained (`__cause__`)."""

    def __init__(self, table: str, step: str, cause: BaseException):
        first_line = (_message(cause).strip().splitlines() or [""])[0][:500]
        super().__init__(f"table {table}: {step} failed: {type(cause).__name__}: {first_line}")
        self.table, self.step = table, step


def _message(cause: BaseException) -> str:
    """A JVM error's own message (py4j's first line only says which call failed)."""
    java = getattr(cause, "java_exception", None)
    if java is not None:
        try:
            return f"{java.getClass().getName()}: {java.getMessage()}"
        except Exception:  # the gateway may be gone
            pass
    return str(cause)


@contextmanager
def naming_table(table: str, step: str) -> Iterator[None]:
    """Re-raise an error of the block as `TableFailed` (an interrupt passes unchanged)."""
    try:
        yield
    except TableFailed:
        raise
    except Exception as e:
        raise TableFailed(table, step, e) from e


def caught(task: Callable[[], R]) -> R | TableFailed:
    """The task's result, or the `TableFailed` it raised (any other error propagates)."""
    try:
        return task()
    except TableFailed as e:
        return e

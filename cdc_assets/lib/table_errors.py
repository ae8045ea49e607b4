"""A failure while one table is built names that table.

A window builds every table in one step: one table's Spark error (say an analysis error on
a column) fails the whole window, and Spark's message alone names a column, not the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TableFailed(RuntimeError):
    """One table could not be built or written; the cause is chained (`__cause__`)."""

    def __init__(self, table: str, step: str, cause: BaseException):
        first_line = (str(cause).strip().splitlines() or [""])[0][:500]
        super().__init__(f"table {table}: {step} failed: {type(cause).__name__}: {first_line}")
        self.table, self.step = table, step


@contextmanager
def naming_table(table: str, step: str) -> Iterator[None]:
    """Re-raise an error of the block as `TableFailed` (an interrupt passes unchanged)."""
    try:
        yield
    except TableFailed:
        raise
    except Exception as e:
        raise TableFailed(table, step, e) from e

"""A failure while one table is built or written names the table (issue 42, item 3)."""

from __future__ import annotations

import pytest

from cdc_assets.common.concurrent_jobs import run_concurrently
from cdc_assets.snapshot.table_errors import TableFailed, naming_table


def _fails(table: str, error: BaseException):
    def task():
        with naming_table(table, "writing its snapshot"):
            raise error
    return task


def test_the_error_names_the_table_and_keeps_its_cause():
    cause = ValueError("[UNRESOLVED_COLUMN] coupon\n<the plan, many lines>")
    with pytest.raises(TableFailed) as info:
        _fails("shop.t", cause)()
    assert str(info.value) == "table shop.t: writing its snapshot failed: ValueError: [UNRESOLVED_COLUMN] coupon"
    assert info.value.__cause__ is cause and info.value.table == "shop.t"


def test_an_inner_table_failure_is_not_wrapped_twice():
    with pytest.raises(TableFailed, match=r"^table a\.b: applying its rows failed: KeyError"):
        with naming_table("shop.outer", "its DDL"):
            with naming_table("a.b", "applying its rows"):
                raise KeyError("x")


def test_an_interrupt_passes_unchanged():
    with pytest.raises(KeyboardInterrupt):
        _fails("shop.t", KeyboardInterrupt())()


def test_concurrent_tables_each_name_theirs():
    ok = lambda: 1  # noqa: E731
    with pytest.raises(TableFailed) as info:
        run_concurrently([ok, _fails("shop.a", RuntimeError("boom")), _fails("shop.b", OSError("disk"))])
    assert str(info.value) == "table shop.a: writing its snapshot failed: RuntimeError: boom"
    assert info.value.__notes__ == ["another concurrent task also failed: "
                                    "TableFailed('table shop.b: writing its snapshot failed: OSError: disk')"]

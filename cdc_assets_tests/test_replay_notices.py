"""What the replay leaves out of its output, and only that."""

from __future__ import annotations

import logging
from pathlib import Path

from cdc_assets.replay import DAGSTER_PLAN_LOGGER, _RangeCheckNotice


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord(DAGSTER_PLAN_LOGGER, logging.WARNING, __file__, 1, message, None, None)


def test_only_dagsters_no_result_warning_of_a_range_runs_check_is_dropped():
    notice = _RangeCheckNotice()
    assert not notice.filter(_record(
        "Blocking asset check 'src/change_table:window_complete' emitted no result in step "
        "'src__decode_and_align'; downstream step 'src__snapshots_and_history' will proceed without gating on it."))
    assert notice.filter(_record("Step 'src__decode_and_align' failed"))
    assert notice.filter(_record("Blocking asset check emitted a failure"))


def test_the_warning_names_the_module_it_is_dropped_from():
    # Dagster logs it with the module's own logger: the filter sits on that logger.
    from dagster._core.execution.plan import active

    assert active.logger.name == DAGSTER_PLAN_LOGGER
    assert "emitted no result" in Path(active.__file__).read_text()

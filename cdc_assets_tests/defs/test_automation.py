"""The hourly schedule requests every complete window not yet materialized, quiet ones too."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from dagster import build_schedule_context, instance_for_test

from cdc_assets.defs.factory import build_definitions
from cdc_assets.lib.settings import load_settings
from cdc_assets.lib.storage import write_json_atomic
from cdc_assets.lib.tso import ms_to_tso
from cdc_assets.lib.watermark_state import Completeness, LandingState
from cdc_assets.lib.window_plan import windows_to_materialize

REPO = Path(__file__).resolve().parents[2]
H = 3_600_000
W0 = 1767225600000  # 2026-01-01T00:00Z


def _state(watermark_ms: int) -> LandingState:
    state = LandingState()
    state.windows = {W0: 10, W0 + 2 * H: 5}  # the hour in between is quiet
    state.partitions = {
        f"t/{p}": {"topic": "t", "kafka_partition": p, "messages": 5, "max_offset": 9,
                   "max_watermark_ts": ms_to_tso(watermark_ms), "max_routing_ms": watermark_ms}
        for p in (0, 1)
    }
    return state


def test_plan_includes_quiet_windows_and_skips_materialized_ones():
    state = _state(W0 + 3 * H)
    plan = windows_to_materialize(state, Completeness(), H, W0, materialized={W0})
    assert plan == [W0 + H, W0 + 2 * H]
    # Nothing complete yet: nothing to do.
    assert windows_to_materialize(_state(W0 + H // 2), Completeness(), H, W0, set()) == []


def test_schedule_requests_pending_windows_oldest_first(tmp_path):
    settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path)})
    landing = settings.warehouse / "sample" / "landing"
    write_json_atomic(landing / "state.json", _state(W0 + 3 * H).to_json())
    write_json_atomic(settings.warehouse / "sample" / "snapshots" / "_manifests" / f"window_start_ms={W0}.json",
                      {"tables": {}})
    defs = build_definitions(settings)
    schedule = next(s for s in defs.schedules if s.name.endswith("complete_windows_hourly"))
    with instance_for_test() as instance:
        context = build_schedule_context(
            instance=instance, repository_def=defs.get_repository_def(),
            scheduled_execution_time=datetime(2026, 1, 1, 4, 10, tzinfo=timezone.utc))
        requests = list(schedule.evaluate_tick(context).run_requests)
    assert [r.partition_key for r in requests] == ["2026-01-01-01:00", "2026-01-01-02:00"]


def test_every_run_of_a_source_carries_its_tag_and_the_instance_limits_it_to_one(tmp_path, monkeypatch):
    from dagster import DagsterInstance

    from cdc_assets.defs.automation import SOURCE_TAG

    defs = build_definitions(load_settings({"CDC_ASSETS_SOURCE": "orders"}))
    for name in ("orders__windows", "orders__land"):
        assert defs.resolve_job_def(name).tags[SOURCE_TAG] == "orders"
    # The shipped dagster.yaml loads and limits that tag to one run per value.
    (tmp_path / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with DagsterInstance.get() as instance:
        (limit,) = instance.run_coordinator.get_run_queue_config().tag_concurrency_limits
    assert limit == {"key": SOURCE_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}

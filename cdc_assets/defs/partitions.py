"""commitTs windows as Dagster partitions (UTC, fixed width; hourly by default).

Both windowed steps (the raw, change_table and quarantine step in layers/change_table.py, the
snapshots step in layers/snapshots.py) have `BackfillPolicy.single_run()`: a backfill of N
windows is one run over the partition range, and each step handles the windows in order. Dagster 1.13 gives an `AssetCheckResult` of a range
run no partition, and an output or `MaterializeResult` of a range run the same metadata for
every window, so the step attaches each window's figures to that window's materialization
(`add_asset_metadata(partition_key=k)`) and yields each check as `AssetCheckEvaluation(partition=k)`
(defs/range_reporting.py): the UI and GraphQL (`assetCheckExecutions(partition:)`) show each
window's figures and check results. The snapshots build on their previous window (a
self-dependency): Dagster's backfill accepts such an asset over a range in one run once the
range's parents are materialized, and the step applies the windows in order.
"""

from __future__ import annotations

from dagster import TimeWindowPartitionsDefinition

from cdc_assets.common.settings import Settings

PARTITION_FMT = "%Y-%m-%d-%H:%M"


def cron_for_minutes(minutes: int) -> str:
    if minutes < 60 and 60 % minutes == 0:
        return f"*/{minutes} * * * *" if minutes > 1 else "* * * * *"
    if minutes == 60:
        return "0 * * * *"
    if minutes % 60 == 0 and 1440 % minutes == 0:
        hours = minutes // 60
        return "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"
    raise ValueError(f"window of {minutes} min must divide an hour or a day evenly")


def window_partitions(settings: Settings) -> TimeWindowPartitionsDefinition:
    return TimeWindowPartitionsDefinition(
        start=settings.partition_start,
        cron_schedule=cron_for_minutes(settings.window_minutes),
        fmt=PARTITION_FMT,
        timezone="UTC",
    )


def window_bounds_ms(partitions_def: TimeWindowPartitionsDefinition, key: str) -> tuple[int, int]:
    w = partitions_def.time_window_for_partition_key(key)
    return int(w.start.timestamp() * 1000), int(w.end.timestamp() * 1000)


def partition_key_for_ms(partitions_def: TimeWindowPartitionsDefinition, start_ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(start_ms / 1000, tz=timezone.utc).strftime(PARTITION_FMT)

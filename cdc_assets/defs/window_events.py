"""A windowed step's events, one window at a time, whether its run holds one window or a range.

The raw and decode-and-align steps run over a range of windows in one run
(`BackfillPolicy.single_run()`; a run of one window is a range of one). Dagster gives an output
or a `MaterializeResult` of a range run one materialization per window, all with the same
metadata, and sets no partition on an `AssetCheckResult` of a range run, so in a range each
window reports its own events: `AssetMaterialization(partition=k)` and
`AssetCheckEvaluation(partition=k)` (docs/performance.md §3). A run of one window yields
`MaterializeResult` and `AssetCheckResult`, as an asset step does: its outputs are then yielded,
so the steps after it in the same run (the snapshots) run, and a failed blocking check gates them."""

from __future__ import annotations

from dagster import (
    AssetCheckEvaluation, AssetCheckKey, AssetCheckResult, AssetExecutionContext, AssetKey, AssetMaterialization,
    Failure, MaterializeResult,
)


class WindowEvents:
    """What a step yields for window `partition` of its run (`context.partition_keys`)."""

    def __init__(self, context: AssetExecutionContext, partition: str):
        self.partition = partition
        self.in_range = len(context.partition_keys) > 1
        self._assets = context.selected_asset_keys
        self._checks = context.selected_asset_check_keys
        self.failed_blocking: list[str] = []

    def materialized(self, key: AssetKey, metadata: dict):
        """The window's materialization of `key` (nothing when the run did not select it)."""
        if key not in self._assets:
            return
        yield (AssetMaterialization(key, partition=self.partition, metadata=metadata) if self.in_range
               else MaterializeResult(asset_key=key, metadata=metadata))

    def checked(self, result: AssetCheckResult, blocking: bool = False):
        """The window's result of a check (nothing when the run did not select it); a failed
        blocking one is remembered, so the range stops after this window (`stop_if_blocked`)."""
        if AssetCheckKey(result.asset_key, result.check_name) not in self._checks:
            return
        if blocking and not result.passed:
            self.failed_blocking.append(result.check_name)
        if not self.in_range:
            yield result
            return
        yield AssetCheckEvaluation(
            asset_key=result.asset_key, check_name=result.check_name, passed=result.passed,
            metadata=result.metadata or {}, severity=result.severity, blocking=blocking, partition=self.partition)

    def stop_if_blocked(self) -> None:
        """Later windows of the range are not written after a failed blocking check."""
        if self.failed_blocking:
            raise Failure(f"window {self.partition}: blocking check(s) failed: {', '.join(self.failed_blocking)}; "
                          "the later windows of the run were not written")

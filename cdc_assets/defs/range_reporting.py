"""A windowed step's events, window by window, whether its run holds one window or a range.

The raw, change_table and quarantine step runs over a range of windows in one run
(`BackfillPolicy.single_run()`; a run of one window is a range of one). Dagster 1.13 gives an
`AssetCheckResult` of a range run no partition, and an output of a range run one
materialization per window with the output's metadata for all of them. So, in a range:
each check result is yielded as `AssetCheckEvaluation(partition=k)`, each window's figures are
attached to that window's materialization (`add_asset_metadata(partition_key=k)`), and the
outputs are yielded once at the end, which gives one materialization per window with its own
figures and lets the steps after it in the same run (the snapshots) run: a step after one
that yielded no output would be skipped. A run of one window yields `MaterializeResult` and
`AssetCheckResult` as they come, as an asset step does (a failed blocking check gates the
steps after it)."""

from __future__ import annotations

from dagster import (
    AssetCheckEvaluation, AssetCheckKey, AssetCheckResult, AssetExecutionContext, AssetKey, AssetMaterialization,
    Failure, MaterializeResult,
)


class WindowEvents:
    """What a step yields for the windows of its run (`context.partition_keys`), in order."""

    def __init__(self, context: AssetExecutionContext):
        self.context = context
        self.in_range = len(context.partition_keys) > 1
        self._assets = context.selected_asset_keys
        self._checks = context.selected_asset_check_keys
        self._reported: list[tuple[AssetKey, str, dict]] = []  # a range's materializations so far
        self.failed_blocking: list[str] = []

    def materialized(self, key: AssetKey, partition: str, metadata: dict):
        """The window's materialization of `key` (nothing when the run did not select it)."""
        if key not in self._assets:
            return
        if not self.in_range:
            yield MaterializeResult(asset_key=key, metadata=metadata)
            return
        self.context.add_asset_metadata(metadata, asset_key=key, partition_key=partition)
        self._reported.append((key, partition, metadata))

    def checked(self, result: AssetCheckResult, partition: str, blocking: bool = False):
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
            metadata=result.metadata or {}, severity=result.severity, blocking=blocking, partition=partition)

    def stop_if_blocked(self, partition: str):
        """After a failed blocking check the later windows of the range are not written."""
        if self.failed_blocking:
            yield from self.stop(f"window {partition}: blocking check(s) failed: {', '.join(self.failed_blocking)}; "
                                 "the later windows of the run were not written")

    def stop(self, description: str, metadata: dict | None = None):
        """Fail the step at this window: the windows written so far are reported one by one
        (no output is yielded), then the step fails."""
        for key, done, figures in self._reported:
            yield AssetMaterialization(key, partition=done, metadata=figures)
        raise Failure(description=description, metadata=metadata)

    def outputs(self):
        """A range's outputs, once, after its last window: one materialization per window and
        asset, each with the figures `materialized` attached to it."""
        if self.in_range:
            # In the order first reported: a multi-asset yields its outputs upstream first.
            for key in dict.fromkeys(key for key, _, _ in self._reported):
                yield MaterializeResult(asset_key=key)

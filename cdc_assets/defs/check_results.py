"""Turn validation outcomes into Dagster asset check results (failing counts in metadata)."""

from __future__ import annotations

from dagster import (
    AssetCheckEvaluation, AssetCheckResult, AssetCheckSeverity, AssetKey, AssetMaterialization, MaterializeResult,
    MetadataValue,
)

from cdc_assets.contracts.checks import ValidationOutcome


def contract_check(asset_key: AssetKey, name: str, outcome: ValidationOutcome) -> AssetCheckResult:
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=name,
        passed=outcome.passed,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "failure_count": outcome.failure_count,
            "failed_checks": len(outcome.failed_checks),
            "invariant_violations": MetadataValue.json(outcome.invariant_violations),
            "failed_check_details": MetadataValue.json(outcome.failed_checks[:20]),
        },
    )


def in_partition(event: AssetCheckResult | MaterializeResult, partition: str) -> AssetCheckEvaluation | AssetMaterialization:
    """A step's result as one window's own event. In a run over a range of windows Dagster sets
    no partition on a check result (only a one-partition run has a partition key), and gives
    every partition of the range the same materialization: a range run reports each window
    through these instead (docs/performance.md §3)."""
    if isinstance(event, MaterializeResult):
        return AssetMaterialization(asset_key=event.asset_key, partition=partition, metadata=event.metadata)
    return AssetCheckEvaluation(asset_key=event.asset_key, check_name=event.check_name, passed=event.passed,
                                metadata=event.metadata, severity=event.severity, description=event.description,
                                partition=partition)

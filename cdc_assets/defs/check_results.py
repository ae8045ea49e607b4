"""Turn validation outcomes into Dagster asset check results (failing counts in metadata)."""

from __future__ import annotations

from dagster import AssetCheckResult, AssetCheckSeverity, AssetKey, MetadataValue

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


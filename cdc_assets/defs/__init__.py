"""Dagster wiring: one module per layer; pure logic lives in `cdc_assets.lib`."""

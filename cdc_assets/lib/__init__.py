"""Pure, testable building blocks: no Dagster wiring in here (see `cdc_assets.defs`)."""

"""cdc_assets."""

"""Dagster entry point (`dagster dev -w workspace.yaml`): settings come from the environment."""

from cdc_assets.common.settings import load_settings
from cdc_assets.defs.factory import build_definitions

defs = build_definitions(load_settings())

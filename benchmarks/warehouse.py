"""An empty warehouse for one benchmark write, opened by the benchmark's own session."""

from __future__ import annotations

import shutil
from pathlib import Path


def fresh_warehouse(spark, warehouse: Path) -> None:
    """Remove `warehouse` (its catalog file and tables) and point `spark`'s catalog `cdc` at
    the empty one (`iceberg_catalog.use_catalog`). When `cdc` already pointed there, the
    session's loaded catalog is dropped too: it would keep the removed catalog file open and
    still name the removed tables."""
    from cdc_assets.common.warehouse import CATALOG, _catalog_manager, catalog_uri, use_catalog

    same = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri", None) == catalog_uri(warehouse)
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)  # SQLite creates the catalog file, not its folder
    use_catalog(spark, warehouse)
    manager = _catalog_manager(spark) if same else None
    if manager is not None:
        manager.reset()

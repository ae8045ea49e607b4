"""The Spark session a benchmark writes one warehouse's snapshots with."""

from __future__ import annotations

from pathlib import Path


def on_warehouse(spark, warehouse: Path):
    """A session of `spark`'s context whose catalog `cdc` is `warehouse`'s, as in a run of the
    pipeline (one warehouse per process). Not `use_catalog`'s second name (`cdc_<digest>`):
    Iceberg's JDBC catalog stores a table under the Spark name of its catalog, and pyiceberg
    (`publish`, `read_entry_arrow`) opens the catalog as `cdc`, so it would not find the
    tables. Frames of the returned session must not be mixed with `spark`'s."""
    from cdc_assets.lib.iceberg_catalog import CATALOG, spark_catalog_conf

    warehouse.mkdir(parents=True, exist_ok=True)  # SQLite creates the catalog file, not its folder
    session = spark.newSession()
    for key, value in spark_catalog_conf(CATALOG, warehouse).items():
        session.conf.set(key, value)
    return session

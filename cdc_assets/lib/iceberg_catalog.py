"""The warehouse's Iceberg catalog: how Spark and pyiceberg open it, and the jars Spark needs.

The embedded default is Iceberg's JDBC catalog on a SQLite file in the warehouse
(`<warehouse>/catalog.db`): no server, and pyiceberg's SQL catalog opens the same file, so
any engine with an Iceberg reader (pyiceberg → Arrow → DuckDB, Trino, …) reads the tables.

Spark and pyiceberg both know the catalog as `cdc` (the JDBC catalog stores that name with
every table, so it may never differ between processes).
"""

from __future__ import annotations

import sys
from pathlib import Path

CATALOG = "cdc"
CATALOG_FILE = "catalog.db"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
# The Iceberg Spark runtime, its AWS bundle and the SQLite JDBC driver (jars/pom.xml).
JARS_DIR = Path(sys.prefix) / "jars"


def spark_jars() -> list[str]:
    """The jars `make install` copied into the virtual environment (jars/pom.xml)."""
    jars = sorted(str(p) for p in JARS_DIR.glob("*.jar"))
    if not any("iceberg-spark-runtime" in j for j in jars):
        raise RuntimeError(f"no Iceberg Spark runtime in {JARS_DIR}: run `make install` (it fetches the jars "
                           "of jars/pom.xml with Maven)")
    return jars


def catalog_uri(warehouse: Path | str) -> str:
    return f"jdbc:sqlite:{Path(warehouse) / CATALOG_FILE}"


def spark_catalog_conf(name: str, warehouse: Path | str) -> dict[str, str]:
    """Session settings (all `spark.sql.`, so a Spark Connect client may set them) of the
    catalog `name` on `warehouse`."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": catalog_uri(warehouse),
        # V1: the catalog tables pyiceberg's SQL catalog reads too (views are not used)
        f"{prefix}.jdbc.schema-version": "V1",
        # SQLite takes one writer at a time: the tables of a window commit from a few threads
        f"{prefix}.jdbc.busy_timeout": "60000",
        # Tags and `main` are also moved by pyiceberg (iceberg_tables.publish): a table Spark
        # had cached would not see them.
        f"{prefix}.cache-enabled": "false",
        f"{prefix}.warehouse": str(warehouse),
    }


def use_catalog(spark, warehouse: Path | str) -> str:
    """The name under which `spark` reads and writes `warehouse`'s catalog: always `cdc`.

    Iceberg's JDBC catalog keys every table by the catalog's name, so the name must be the
    same in every process (pyiceberg opens `cdc` too). A process normally works on the one
    warehouse its settings name; one that meets another (the tests, the benchmarks) points
    `cdc` at it and drops the session's loaded catalogs, so the next statement opens it."""
    uri = catalog_uri(warehouse)
    # The conf alone does not tell: `SparkSession.builder.getOrCreate()` (PySparkResource)
    # sets a new warehouse's conf on a session whose catalog is already loaded on the old one.
    if getattr(spark, _LOADED_URI, None) != uri:
        for key, value in spark_catalog_conf(CATALOG, warehouse).items():
            spark.conf.set(key, value)
        manager = _catalog_manager(spark)
        if manager is not None:
            manager.reset()
        setattr(spark, _LOADED_URI, uri)
    return CATALOG


_LOADED_URI = "_cdc_assets_catalog_uri"  # on the session object: the warehouse its `cdc` was loaded for


def _catalog_manager(spark):
    """The session's CatalogManager (classic sessions; a Spark Connect session is one
    warehouse's: its server-side catalogs load from the settings the client sent)."""
    jsession = getattr(spark, "_jsparkSession", None)
    return None if jsession is None else jsession.sessionState().catalogManager()


def pyiceberg_properties(warehouse: Path | str) -> dict[str, str]:
    """What `pyiceberg.catalog.load_catalog(CATALOG, **properties)` takes to open the catalog."""
    root = Path(warehouse).absolute()
    return {"type": "sql", "uri": f"sqlite:///{root / CATALOG_FILE}", "warehouse": root.as_uri()}


def load_pyiceberg_catalog(warehouse: Path | str):
    from pyiceberg.catalog import load_catalog

    if "://" not in str(warehouse):  # a local warehouse's catalog file needs its folder (SQLite makes none)
        Path(warehouse).mkdir(parents=True, exist_ok=True)
    return load_catalog(CATALOG, **pyiceberg_properties(warehouse))

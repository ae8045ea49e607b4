"""Table maintenance of a source's Iceberg tables: expire old snapshots and remove the files no
snapshot references.

Every window adds snapshots (a snapshot table's window branch commit, a layer's window
overwrite, the schema changes between them); without maintenance metadata and files only
grow. Iceberg's own procedures do the work. What is kept:
- every snapshot a tag points at: the `end-…` tag of every window end stays readable
  (`expire_snapshots` never expires a snapshot a ref holds), and `main`;
- every snapshot younger than the retention;
- files younger than the retention, and at least a day (`remove_orphan_files` would otherwise
  delete the files of a write in flight; Iceberg refuses a shorter interval).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyspark.sql import SparkSession

from cdc_assets.common.iceberg_tables import IcebergTable
from cdc_assets.common.warehouse import as_warehouse, load_pyiceberg_catalog, use_catalog

# No compaction (rewrite_data_files): it would commit to `main`, but the next window cuts its
# branch from the previous window's tagged snapshot and publishing moves `main` there, so the
# compacted files would never be read. A snapshot table's files stay few anyway: each window
# rewrites the key-range files it touches (iceberg_tables).


ORPHAN_MIN_AGE = timedelta(days=1)


def source_tables(warehouse, source: str) -> list[str]:
    """The Iceberg tables of a source (their names in its namespace); none before a first window."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        return sorted(t[-1] for t in load_pyiceberg_catalog(warehouse).list_tables((source,)))
    except NoSuchNamespaceError:
        return []


def maintain_source(spark: SparkSession, warehouse, source: str, retention: timedelta,
                    now: datetime | None = None) -> dict[str, dict[str, int]]:
    """Run the maintenance on every table of `source`; per table, what each step did."""
    catalog = use_catalog(spark, warehouse)
    now = now or datetime.now(timezone.utc)
    older_than = (now - retention).strftime("%Y-%m-%d %H:%M:%S.%f")
    # Iceberg refuses to remove orphans younger than a day: a write in flight has such files.
    orphans_older_than = (now - max(retention, ORPHAN_MIN_AGE)).strftime("%Y-%m-%d %H:%M:%S.%f")
    # On an object store the files are listed by the table's own FileIO (S3FileIO's prefix
    # listing), not by Hadoop's file system, which would need s3a and its jars.
    listing = ", prefix_listing => true" if as_warehouse(warehouse).is_s3 else ""
    out = {}
    pyiceberg = load_pyiceberg_catalog(warehouse)
    for name in source_tables(warehouse, source):
        table = IcebergTable(catalog, source, name, "").in_catalog
        done: dict[str, int] = {}
        row = spark.sql(f"CALL {catalog}.system.expire_snapshots(table => '{table}', "
                        f"older_than => TIMESTAMP '{older_than}', retain_last => 1)").first()
        done["data_files_deleted"] = int(row["deleted_data_files_count"])
        done["manifest_files_deleted"] = int(row["deleted_manifest_files_count"])
        orphans = spark.sql(f"CALL {catalog}.system.remove_orphan_files(table => '{table}', "
                            f"older_than => TIMESTAMP '{orphans_older_than}'{listing})").count()
        done["orphan_files_removed"] = orphans
        done["snapshots_kept"] = len(pyiceberg.load_table((source, name)).metadata.snapshots)
        out[name] = done
    return out

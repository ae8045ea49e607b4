"""Spark's Python daemon (`spark.python.daemon.module`): PySpark's own, with zip archives on the
workers' path re-read only when they change.

Every Python task (a decoder's `mapInArrow`) starts with `importlib.invalidate_caches()`
(`pyspark.worker_util.setup_spark_files`). Up to Python 3.11 that re-reads the whole
directory of every zip archive an import came from, once per package imported from it, and
Spark puts three on the workers' path: pyspark.zip, py4j's zip and the spark-core jar (its
thousands of entries). That cost about 0.4 s per task on a 2-core machine before the task
read its first row, whatever its size: most of a small window's decode. The archives are
Spark's installation; one that did change (its size or modification time) is re-read as
before. Python 3.12 and later re-read lazily and are left alone.
"""

from __future__ import annotations

import os
import runpy
import sys
import zipimport

PYTHON_DAEMON_MODULE = "cdc_assets.common.python_daemon"  # this module, as `python -m` runs it


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


def reread_changed_archives_only() -> None:
    """Patch `zipimporter.invalidate_caches` of this process (and the workers it forks)."""
    reread = zipimport.zipimporter.invalidate_caches
    read_at: dict[str, tuple[int, int] | None] = {}

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        stamp = _stamp(self.archive)
        if stamp is not None and read_at.get(self.archive) == stamp:
            return  # unchanged since this process last read it: every importer of it is current
        reread(self)
        read_at[self.archive] = stamp

    zipimport.zipimporter.invalidate_caches = invalidate_caches


if __name__ == "__main__":
    if sys.version_info < (3, 12):
        reread_changed_archives_only()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)

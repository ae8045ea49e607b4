"""Spark's Python daemon of the session (common/python_daemon.py): zip archives on the workers'
path are re-read only when they change, and the session's workers run it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile

import pyarrow as pa

from cdc_assets.common.python_daemon import PYTHON_DAEMON_MODULE

_PROBE = textwrap.dedent("""
    import importlib, sys, zipimport, zipfile, os
    from cdc_assets.common.python_daemon import reread_changed_archives_only
    archive = sys.argv[1]
    reads = []
    read_directory = zipimport._read_directory
    zipimport._read_directory = lambda path: reads.append(path) or read_directory(path)
    reread_changed_archives_only()
    sys.path.insert(0, archive)
    import first_module
    reads.clear()                        # the import's own read
    importlib.invalidate_caches(); importlib.invalidate_caches(); importlib.invalidate_caches()
    print(len(reads))                    # the first invalidation reads it, the next two do not
    with zipfile.ZipFile(archive, "a") as z:
        z.writestr("second_module.py", "VALUE = 2\\n")
    os.utime(archive, ns=(0, 10**18))    # a new size and modification time
    importlib.invalidate_caches()
    import second_module
    print(len(reads), second_module.VALUE)
""")


def test_an_archive_is_read_again_only_when_it_changed(tmp_path):
    archive = tmp_path / "modules.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("first_module.py", "VALUE = 1\n")
    done = subprocess.run([sys.executable, "-c", _PROBE, str(archive)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    if sys.version_info < (3, 12):
        assert first == "1"
        assert second == "2 2"  # the changed archive was read again, and its new module imports


def test_the_sessions_python_workers_run_the_daemon_of_this_module(spark):
    def which(batches):
        import zipimport

        for _ in batches:
            pass
        patched = "reread_changed_archives_only" in zipimport.zipimporter.invalidate_caches.__qualname__
        yield pa.RecordBatch.from_pydict({"patched": [patched]})

    assert spark.conf.get("spark.python.daemon.module") == PYTHON_DAEMON_MODULE
    rows = spark.range(10).repartition(2).mapInArrow(which, "patched boolean").collect()
    assert rows and all(r.patched for r in rows) == (sys.version_info < (3, 12))

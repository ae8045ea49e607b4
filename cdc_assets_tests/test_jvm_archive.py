"""`cdc-assets jvm-archive` end to end: the archive it writes is mapped by the next driver
JVM, and an unusable archive costs nothing but the speed-up."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cdc_assets.common import jvm_archive_build
from cdc_assets.common.jvm_archive_build import build

pytestmark = pytest.mark.slow

# A fresh process starts a driver JVM with the project's settings, which logs where each
# class came from.
_START_A_SESSION = """
import sys
from cdc_assets.common.settings import load_settings
from cdc_assets.common.spark_session import spark_config, start_spark_session
conf = spark_config(load_settings())
conf["spark.driver.extraJavaOptions"] = (
    conf.get("spark.driver.extraJavaOptions", "") + f" -Xlog:class+load=info:file={sys.argv[1]}")
conf["spark.driver.memory"] = "1g"
start_spark_session(conf).range(10).count()
"""


def _class_sources(tmp_path, archive) -> dict[str, str]:
    log = tmp_path / f"{archive.name}.classes.log"
    subprocess.run([sys.executable, "-c", _START_A_SESSION, str(log)], check=True, timeout=300,
                   env={**os.environ, "CDC_ASSETS_JVM_ARCHIVE": str(archive)}, capture_output=True)
    sources = {}
    for line in log.read_text().splitlines():  # [0.18s][info][class,load] <class> source: <where>
        name, _, where = line.split("] ", 1)[-1].partition(" source: ")
        sources[name] = where
    return sources


def test_the_next_driver_jvm_loads_sparks_classes_from_the_archive(tmp_path, monkeypatch):
    folder = tmp_path / "a folder"  # a space: the launcher splits java options on spaces
    folder.mkdir()
    archive = folder / "spark-9.9.9-driver.jsa"
    monkeypatch.setattr(jvm_archive_build, "default_archive_path", lambda: archive)
    # The default archive of an earlier pyspark goes; a file of the user's stays.
    (folder / "spark-9.9.8-driver.jsa").write_bytes(b"old")
    (folder / "mine.jsa").write_bytes(b"mine")
    try:
        written = build()
        assert written["archive"] == str(archive) and written["mb"] > 10
        assert written["removed"] == [str(folder / "spark-9.9.8-driver.jsa")]
        # No partial file left.
        assert sorted(p.name for p in folder.iterdir()) == ["mine.jsa", "spark-9.9.9-driver.jsa"]

        sources = _class_sources(tmp_path, archive)
        assert sources["org.apache.spark.SparkContext"] == "shared objects file (top)"
        assert sources["org.apache.spark.sql.SparkSession"] == "shared objects file (top)"
    finally:
        archive.unlink(missing_ok=True)  # ~185 MB: not kept in pytest's temporary folders


def test_a_file_that_is_not_an_archive_still_starts_the_session(tmp_path):
    archive = tmp_path / "random.jsa"
    archive.write_bytes(os.urandom(1 << 16))
    sources = _class_sources(tmp_path, archive)
    assert "spark-core" in sources["org.apache.spark.SparkContext"]  # read from its jar


class _ChildThatWritesTheArchive:
    """Stands in for the warm-up child: writes the partial archive it is given, exits 0."""

    def __init__(self, argv, **_kwargs):
        self.pid, self.returncode, self._partial = -1, None, argv[3]

    def communicate(self, timeout=None):
        with open(self._partial, "wb") as f:
            f.write(b"x" * (1 << 20))
        self.returncode = 0
        return "", ""


def test_an_archive_written_elsewhere_removes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm_archive_build.subprocess, "Popen", _ChildThatWritesTheArchive)
    monkeypatch.setattr(jvm_archive_build, "_kill_group", lambda pid: None)
    monkeypatch.setattr(jvm_archive_build, "default_archive_path", lambda: tmp_path / "spark-9.9.9-driver.jsa")
    (tmp_path / "spark-9.9.8-driver.jsa").write_bytes(b"old")

    written = build(tmp_path / "spark-9.9.7-driver.jsa")  # --out
    assert written["removed"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spark-9.9.7-driver.jsa", "spark-9.9.8-driver.jsa"]

    written = build()  # the default: the other versions' archives go
    assert written["removed"] == [str(tmp_path / "spark-9.9.7-driver.jsa"), str(tmp_path / "spark-9.9.8-driver.jsa")]
    assert [p.name for p in tmp_path.iterdir()] == ["spark-9.9.9-driver.jsa"]

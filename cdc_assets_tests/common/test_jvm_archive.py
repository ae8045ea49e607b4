"""Where the driver JVM's class archive is looked for."""

from __future__ import annotations

import sys
from pathlib import Path

from cdc_assets.common.jvm_archive import configured_archive, default_archive_path, superseded_archives, with_archive


def test_the_default_archive_lives_in_the_virtual_environment_and_names_its_pyspark():
    from pyspark import __version__

    path = default_archive_path()
    assert path.parent == Path(sys.prefix) / "share" / "cdc_assets"
    assert path.name == f"spark-{__version__}-driver.jsa"
    assert configured_archive({}) == str(path)


def test_the_variable_moves_or_turns_off_the_archive(tmp_path):
    assert configured_archive({"CDC_ASSETS_JVM_ARCHIVE": str(tmp_path / "a.jsa")}) == str(tmp_path / "a.jsa")
    for off in ("none", "OFF", ""):
        assert configured_archive({"CDC_ASSETS_JVM_ARCHIVE": off}) is None


def test_the_archive_option_goes_ahead_of_other_default_options_and_is_quoted_when_it_has_a_space():
    assert with_archive(None, "/a.jsa") == "-XX:SharedArchiveFile=/a.jsa"
    assert with_archive("-Xss4m", "/a.jsa") == "-XX:SharedArchiveFile=/a.jsa -Xss4m"
    assert with_archive(None, "/my dir/a.jsa") == '"-XX:SharedArchiveFile=/my dir/a.jsa"'


def test_superseded_archives_are_the_other_versions_default_archives_only(tmp_path):
    for name in ("spark-4.2.0-driver.jsa", "spark-4.3.0-driver.jsa", "spark-4.3.0-driver.jsa.bak", "mine.jsa"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "spark-4.1.0-driver.jsa").mkdir()  # not a file: left alone
    assert superseded_archives(tmp_path, "spark-4.3.0-driver.jsa") == [tmp_path / "spark-4.2.0-driver.jsa"]

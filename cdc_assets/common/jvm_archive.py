"""A class-data-sharing (CDS) archive for the Spark driver JVM.

Starting a local Spark session loads many thousands of classes from Spark's jars; each is
read, verified and linked, which is most of the session's start. A dynamic CDS archive
(JDK 13+) holds those classes ready to map: it is written once by a JVM that ran jobs like
the pipeline's (`cdc-assets jvm-archive`; `make dev` and `make bench` run it) and mapped by
every later driver JVM (docs/configuration.md has the measured gain).

HotSpot checks the archive's header against its own build and the classpath's jars when it
maps it, and starts without it when the file is missing, is not an archive, or was built by
another JDK or for other jars: a stale archive loses the speed-up, it never fails a run.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path

ARCHIVE_VARIABLE = "CDC_ASSETS_JVM_ARCHIVE"
# Spark's launcher puts the driver's default options before its extra ones, so the archive
# goes in the defaults: the user's `spark.driver.extraJavaOptions` (from any source) stay as
# they are, and a `-XX:SharedArchiveFile` of theirs comes later and wins.
DRIVER_DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
_DISABLED = {"", "none", "off"}
# The default archive's file name: one per pyspark version, as it holds that version's classes.
_DEFAULT_NAME = "spark-{version}-driver.jsa"


def default_archive_path() -> Path:
    """Inside the virtual environment: the archive belongs to its pyspark jars."""
    return Path(sys.prefix) / "share" / "cdc_assets" / _DEFAULT_NAME.format(version=version("pyspark"))


def superseded_archives(folder: Path, keep: str) -> list[Path]:
    """Default archives in `folder` other than `keep`: built for another pyspark version,
    which no session of this environment maps again (each is about 185 MB)."""
    return sorted(p for p in folder.glob(_DEFAULT_NAME.format(version="*")) if p.name != keep and p.is_file())


def configured_archive(env: Mapping[str, str]) -> str | None:
    """The archive path from CDC_ASSETS_JVM_ARCHIVE (`none` turns it off), else the default."""
    text = env.get(ARCHIVE_VARIABLE)
    if text is None:
        return str(default_archive_path())
    return None if text.strip().lower() in _DISABLED else str(Path(text).absolute())


def archive_in_place(archive: str | None) -> str | None:
    """`archive` when its file exists (sessions map it only then), else None."""
    return archive if archive and Path(archive).is_file() else None


def prepend_java_option(option: str, java_options: str | None) -> str:
    """`option` ahead of `java_options`; quoted when it holds a space, as Spark's launcher
    splits options on spaces outside quotes."""
    quoted = f'"{option}"' if any(c.isspace() for c in option) else option
    return " ".join(o for o in (quoted, java_options) if o)


def with_archive(java_options: str | None, archive: str) -> str:
    """Default driver java options that map `archive`, ahead of any set already."""
    return prepend_java_option(f"-XX:SharedArchiveFile={archive}", java_options)

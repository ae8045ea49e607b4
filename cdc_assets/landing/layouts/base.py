"""The interface of a dump layout."""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import ClassVar

from pyspark.sql import Column, DataFrame, SparkSession, functions as F

# Lines / records that are not messages of the layout keep their bytes under this topic
# (partition -1) so they are quarantined downstream instead of being dropped. Their pseudo-offset
# keeps the 0-based line number in its low 32 bits (the rest: a hash of the file and the place,
# so identical lines stay apart): errors name the line (`unparsed_place`).
UNPARSED_TOPIC = "__unparsed__"
_LINE_MASK = (1 << 32) - 1

# Spark / Hadoop bookkeeping next to data files (and Databricks' `_committed_<txn>` /
# `_started_<txn>` markers). Any other name starting with `_` is data (e.g. a
# `_prisma_migrations` or `_started_jobs` table in a storage-sink dump).
_BOOKKEEPING_NAMES = frozenset({"_SUCCESS", "_temporary", "_spark_metadata"})
_BOOKKEEPING_NAME = re.compile(r"_(?:committed|started)_\d+")


def is_hidden_name(part: str) -> bool:
    """A hidden file or folder name (`.name`), or Spark's bookkeeping."""
    return part.startswith(".") or part in _BOOKKEEPING_NAMES or _BOOKKEEPING_NAME.fullmatch(part) is not None


def _hidden(relative: PurePath) -> bool:
    """Hidden files / folders and Spark's bookkeeping in a path below the root."""
    return any(is_hidden_name(part) for part in relative.parts)


def unparsed_offset(place_hash: Column, line_no: Column) -> Column:
    """An unparsed record's pseudo-offset: the hash's high bits, the line number's low bits."""
    return place_hash.bitwiseAND(F.lit(~_LINE_MASK)).bitwiseOR(line_no.cast("long").bitwiseAND(F.lit(_LINE_MASK)))


def python_unparsed_offset(place_hash: int, line_no: int) -> int:
    """`unparsed_offset` in plain Python (a 32-bit hash)."""
    return (place_hash & 0x7FFFFFFF) << 32 | (line_no & _LINE_MASK)


def unparsed_place(offset: int) -> str:
    """Where an unparsed record is in its file, for people (lines counted from 1, as editors do)."""
    return f"line {(offset & _LINE_MASK) + 1}"


def percent_decoded(text: Column) -> Column:
    """%-escapes undone. Hadoop and Spark encode ' ', '%' and more but leave '+' as is, which
    url_decode would read as a space."""
    return F.coalesce(F.try_url_decode(F.replace(text, F.lit("+"), F.lit("%2B"))), text)


def absolute_path(file_uri: Column) -> Column:
    """`file_uri` (Spark's `_metadata.file_path`: a %-encoded `file:` URI) as a plain path."""
    return F.regexp_replace(percent_decoded(file_uri), r"^file:/*", "/")


def relative_path(file_uri: Column, root: Path) -> Column:
    """`file_uri` (Spark's `_metadata.file_path`) as a plain path relative to `root`
    (`a/2026-01-01/events.log`); the absolute path if it is not below root."""
    path = absolute_path(file_uri)
    prefix = os.path.abspath(root).rstrip("/") + "/"
    return F.when(path.startswith(prefix), F.substring(path, len(prefix) + 1, 1 << 30)).otherwise(path)


def check_options(layout: str, known: Mapping[str, str], options: Mapping[str, str] | None) -> None:
    """An option the layout does not know is an error naming it and the known ones (a typo
    would otherwise read the dump with the default)."""
    unknown = sorted(set(options or {}) - set(known))
    if unknown:
        raise ValueError(f"layout {layout}: unknown layout option(s) {unknown}; known: "
                         + (", ".join(sorted(known)) or "none"))


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.?)", re.DOTALL)
_ESCAPED = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def unescaped(text: str, what: str) -> str:
    """`text` with the escapes of a connector's JSON / properties config undone (`\\n`, `\\r`,
    `\\t`, `\\\\`, `\\uXXXX`): a command line or YAML file can then name any string."""
    def one(m: re.Match) -> str:
        code = m.group(1)
        if code.startswith("u") and len(code) == 5:
            return chr(int(code[1:], 16))
        if code in _ESCAPED:
            return _ESCAPED[code]
        raise ValueError(f"{what}: unknown escape {m.group(0)!r} in {text!r} (known: \\n \\r \\t \\\\ \\uXXXX)")

    return _ESCAPE.sub(one, text)


@dataclass(frozen=True)
class SampledMessage:
    """One message read in plain Python (`DumpLayout.sample`): `RAW_MESSAGE_SCHEMA`'s fields."""

    topic: str
    kafka_partition: int
    kafka_offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    source_file: str


class DumpLayout(ABC):
    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]
    #: Options this layout understands (the writer's own names), with their defaults.
    default_options: ClassVar[Mapping[str, str]] = {}
    #: Layouts whose files this layout's files also look like (the storage sink's data files
    #: are `.json` lines, as kcat's may be): when this layout is sniffed, they are no candidates.
    shadows: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Mapping[str, str] | None = None):
        check_options(self.name, self.default_options, options)
        self.options = {**self.default_options, **(options or {})}

    def shadowed(self, root: Path) -> tuple[str, ...]:
        """The layouts this one overrides for the dump under `root` (`shadows` by default)."""
        return self.shadows

    def sniff(self, root: Path) -> str | None:
        """Why the dump under `root` looks like this layout (for `detect_layout` and
        `cdc-assets inspect`), or None. A layout with a surer sign than its files' names
        (a marker file, a naming scheme) overrides this."""
        files = self.list_files(root)
        return f"{len(files)} {'/'.join(self.extensions)} file(s)" if files else None

    def sample(self, files: list[Path], root: Path) -> Iterator[SampledMessage]:
        """The messages of `files` in plain Python, file by file (no Spark): what
        `cdc-assets inspect` and protocol detection read. Same topics, partitions and offsets
        as `read`."""
        raise NotImplementedError(f"the {self.name} layout has no plain-Python reader")

    def is_data_file(self, relative: PurePath) -> bool:
        """Whether a file at this path below the dump root is data of this layout (also
        asked of S3 object keys, so it looks at the name only)."""
        return relative.suffix in self.extensions and not _hidden(relative)

    #: Whether a file cut short by a writer that died can still be read (line files: the cut
    #: record is quarantined) or not at all (Parquet without its footer).
    cut_files_readable: ClassVar[bool] = True

    def scan(self, root: Path) -> tuple[list[Path], dict[Path, str]]:
        """One walk below `root`: (its data files, sorted; the files it cannot read -> why)."""
        data, refused = [], {}
        for path in root.rglob("*"):
            if not path.is_file():
                continue
            relative = path.relative_to(root)
            if self.is_data_file(relative):
                data.append(path)
            elif (reason := self.unsupported(relative)) is not None:
                refused[path] = reason
        return sorted(data), dict(sorted(refused.items()))

    def scan_named(self, root: Path) -> tuple[list[Path], dict[Path, str], dict[Path, str]]:
        """`scan` for a layout the user named explicitly: every other non-hidden file is read as
        this layout too (`reads_other_names`), or returned with why it is not (never left out
        silently): (data files, refused files -> why, ignored files -> why)."""
        data, refused = self.scan(root)
        known, ignored = set(data) | set(refused), {}
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path in known or not path.is_file() or _hidden(relative) or self.is_bookkeeping(relative):
                continue
            why = self.reads_other_names(path)
            if why is None:
                data.append(path)
            else:
                ignored[path] = why
        return sorted(data), refused, ignored

    def reads_other_names(self, path: Path) -> str | None:
        """For a layout named explicitly: None to read a file not named like its data as it
        (line layouts: any file holds lines), else why it is not read."""
        return None

    def is_bookkeeping(self, relative: PurePath) -> bool:
        """A file the layout knows and reads otherwise or needs not (storage sink's index)."""
        return False

    def list_files(self, root: Path) -> list[Path]:
        return self.scan(root)[0]

    def unsupported(self, relative: PurePath) -> str | None:
        """Why a file at this path is data of a form this layout cannot read (the landing
        stops with the reason rather than leave it out), or None."""
        return None

    def is_complete(self, path: Path) -> bool:
        """Whether a data file is whole, not cut short (still being written, or left so)."""
        return True

    @abstractmethod
    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        """Messages of `files` as `RAW_MESSAGE_SCHEMA` (no Spark action)."""

    def checkpoint_ts(self, root: Path) -> int | None:
        """A watermark the layout itself records for every partition (storage sink)."""
        return None

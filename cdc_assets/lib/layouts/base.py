"""The interface of a dump layout."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession

# Lines / records that are not messages of the layout keep their bytes under this topic
# (partition -1) so they are quarantined downstream instead of being dropped.
UNPARSED_TOPIC = "__unparsed__"


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith((".", "_")) for part in path.relative_to(root).parts)


class DumpLayout(ABC):
    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]

    def list_files(self, root: Path) -> list[Path]:
        return sorted(
            p for p in root.rglob("*")
            if p.is_file() and p.suffix in self.extensions and not _hidden(p, root)
        )

    @abstractmethod
    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        """Messages of `files` as `RAW_MESSAGE_SCHEMA` (no Spark action)."""

    def checkpoint_ts(self, root: Path) -> int | None:
        """A watermark the layout itself records for every partition (storage sink)."""
        return None

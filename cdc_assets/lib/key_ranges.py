"""A table's snapshot files split by primary-key range, so that a window rewrites only the
ranges its changes touch and links the others into its folder unchanged.

Range 0 is open below; range i >= 1 starts at `lowers[i - 1]`. A key belongs to the last
range whose lower bound it reaches. The bounds are stored as text and compared as typed
values; rows are always placed with the same expression that later finds them, so a bound
only has to be some value of the key's type (a poor bound costs balance, never a row).
Monotonic keys (AUTO_INCREMENT, time-ordered ids) land in the last range; a range that grows
past twice its target is split where it stands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.lib.snapshot import TableSchema

RANGE_COLUMN = "_cdc_range"
SPLIT_FACTOR = 2  # a range is split once it holds more than this many times its target
_SAMPLES_PER_RANGE = 200  # keys sampled per wanted range when the bounds are chosen


@dataclass(frozen=True)
class KeyRanges:
    key: list[str]  # the primary-key columns the bounds are for
    key_types: list[str]  # their Spark types (JSON), so a retyped key never reuses old bounds
    lowers: list[list[str]]  # lower bounds of ranges 1..n-1, one text per key column
    files: list[list[str]]  # per range: its file names in the table's folder
    rows: list[int]  # per range

    def to_json(self) -> dict:
        return {"key": self.key, "key_types": self.key_types, "lowers": self.lowers, "files": self.files,
                "rows": self.rows}

    @classmethod
    def from_json(cls, d: dict) -> "KeyRanges":
        return cls(list(d["key"]), list(d["key_types"]), [list(b) for b in d["lowers"]],
                   [list(f) for f in d["files"]], [int(r) for r in d["rows"]])

    def fits(self, schema: TableSchema) -> bool:
        """The bounds still apply: same key columns with the same types."""
        return bool(schema.primary_key) and self.key == schema.primary_key and self.key_types == key_types(schema)


def key_types(schema: TableSchema) -> list[str]:
    return [schema.spark_type_of(c).json() for c in schema.primary_key]


def _comparable(column: Column, dtype: T.DataType) -> tuple[Column, T.DataType]:
    """A form of the key column whose text round-trips exactly and does not depend on the
    session's time zone (instants as epoch microseconds, bytes as hex: both keep the order)."""
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(column), T.LongType()
    if isinstance(dtype, T.BinaryType):
        return F.hex(column), T.StringType()
    return column, dtype


def _key(schema: TableSchema) -> Column:
    parts = [_comparable(F.col(c), schema.spark_type_of(c))[0].alias(f"k{i}") for i, c in enumerate(schema.primary_key)]
    return F.struct(*parts)


def _bound(schema: TableSchema, texts: list[str]) -> Column:
    parts = []
    for i, (c, text) in enumerate(zip(schema.primary_key, texts)):
        ctype = _comparable(F.col(c), schema.spark_type_of(c))[1]
        parts.append(F.lit(text).cast(ctype).alias(f"k{i}"))
    return F.struct(*parts)


def range_index(schema: TableSchema, lowers: list[list[str]]) -> Column:
    """The range of each row's key (columns named as the primary key)."""
    if not lowers:
        return F.lit(0)
    key = _key(schema)
    index = None
    for i in range(len(lowers), 0, -1):  # the last bound the key reaches
        reached = key >= _bound(schema, lowers[i - 1])
        index = F.when(reached, F.lit(i)) if index is None else index.when(reached, F.lit(i))
    return index.otherwise(F.lit(0))


def ranges_wanted(rows: int, target_rows: int) -> int:
    return max(1, math.ceil(rows / max(1, target_rows)))


def choose_lowers(frame: DataFrame, schema: TableSchema, ranges: int, rows: int, seed: int = 17) -> list[list[str]]:
    """`ranges - 1` lower bounds that split `frame` (about `rows` rows) evenly, from a sample
    of its keys sorted as typed values. Fewer when the keys are not that many or not distinct."""
    if ranges <= 1 or rows <= 0 or not schema.primary_key:
        return []
    fraction = min(1.0, _SAMPLES_PER_RANGE * ranges / rows)
    n = len(schema.primary_key)
    sample = (frame.select(_key(schema).alias("k")).sample(fraction=fraction, seed=seed).orderBy("k")
              .select(*[F.col(f"k.k{i}").cast("string") for i in range(n)]).collect())
    lowers: list[list[str]] = []
    for i in range(1, ranges):
        texts = list(sample[len(sample) * i // ranges]) if sample else []
        if texts and None not in texts and (not lowers or texts != lowers[-1]):
            lowers.append(texts)
    return lowers

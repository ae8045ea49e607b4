"""MySQL/TiDB column type (as a protocol names it) -> exact Spark type and value cast.

The change log carries canonical strings (see `changelog_schema`); this module turns them
into typed columns. Casts are `try_cast`: a value that does not convert becomes null and
is counted by the caller (`conversion_failures`), never silently lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, functions as F, types as T

_TYPE_RE = re.compile(r"^\s*([a-z]+)\s*(?:\(([^)]*)\))?\s*(.*)$")
MAX_SPARK_PRECISION = 38
BINARY_BASES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
STRING_BASES = {
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext",
    "enum", "set", "json", "time", "geometry", "vector",
}

# Type names official Canal writes verbatim from the DDL (`FIXED(40,3)`, `DEC(8,2)`).
_SYNONYMS = {"fixed": "decimal", "dec": "decimal"}


@dataclass(frozen=True)
class MysqlType:
    base: str
    params: tuple[str, ...]
    unsigned: bool

    @property
    def declared_scale(self) -> int | None:
        if self.base in ("decimal", "numeric") and len(self.params) == 2:
            return int(self.params[1])
        if self.base in ("decimal", "numeric") and len(self.params) == 1:
            return 0
        return None


def parse_mysql_type(text: str | None) -> MysqlType:
    m = _TYPE_RE.match((text or "").lower())
    if not m:
        return MysqlType("unknown", (), False)
    base, params, rest = m.groups()
    plist = tuple(p.strip() for p in params.split(",")) if params else ()
    if base == "serial":  # MySQL alias: BIGINT UNSIGNED NOT NULL AUTO_INCREMENT
        return MysqlType("bigint", (), True)
    base = _SYNONYMS.get(base, base)
    return MysqlType(base, plist, "unsigned" in rest or "unsigned" in base)


def spark_type(mtype: MysqlType, inferred_scale: int = 0) -> T.DataType:
    b, u = mtype.base, mtype.unsigned
    if b in ("bool", "boolean"):
        return T.BooleanType()
    if b == "tinyint":
        return T.ShortType() if u else T.ByteType()
    if b == "smallint":
        return T.IntegerType() if u else T.ShortType()
    if b in ("mediumint",):
        return T.IntegerType()
    if b in ("int", "integer"):
        return T.LongType() if u else T.IntegerType()
    if b == "bigint":
        return T.DecimalType(20, 0) if u else T.LongType()
    if b in ("decimal", "numeric"):
        if len(mtype.params) >= 1 and int(mtype.params[0]) <= MAX_SPARK_PRECISION:
            return T.DecimalType(int(mtype.params[0]), mtype.declared_scale or 0)
        if mtype.params:  # declared wider than Spark can hold exactly
            return T.StringType()
        # No declared parameters (TiCDC's default canal-json): keep every digit seen.
        return T.DecimalType(MAX_SPARK_PRECISION, min(inferred_scale, MAX_SPARK_PRECISION))
    if b == "float":
        return T.FloatType()
    if b in ("double", "real"):
        return T.DoubleType()
    if b in BINARY_BASES:
        return T.BinaryType()
    if b == "date":
        return T.DateType()
    if b == "datetime":
        return T.TimestampNTZType()
    if b == "timestamp":
        return T.TimestampType()
    if b == "year":
        return T.ShortType()
    if b == "bit":
        return T.DecimalType(20, 0)
    return T.StringType()


def typed_value(value: Column, dtype: T.DataType) -> Column:
    """Canonical string -> typed value (null when it does not convert).

    TIMESTAMP text is UTC in the change log; the Spark session runs in UTC
    (`spark.sql.session.timeZone`), so a plain cast yields the right instant.
    """
    if isinstance(dtype, T.BinaryType):
        return F.try_to_binary(value, F.lit("base64"))
    return value.try_cast(dtype)


def is_decimal_without_params(mtype: MysqlType) -> bool:
    return mtype.base in ("decimal", "numeric") and not mtype.params

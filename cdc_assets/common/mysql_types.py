"""MySQL/TiDB column type (as a protocol names it) -> exact Spark type and value cast.

The change log carries canonical strings (see `contracts/schemas`); this module turns them
into typed columns. Casts are `try_cast`: a value that does not convert becomes null and
is counted by the caller (`conversion_failures`), never silently lost.

Nothing here raises on odd type text: unparseable text, an unclosed parameter list, or
decimal parameters that are not integers or not a valid (precision, scale) pair
(`decimal(10,x)`, `decimal(5,10)`, `decimal(0)`) all map to StringType, so the value is
kept as its canonical text.

Decimals declared without parameters (TiCDC's default canal-json) are typed from the data:
`Decimal(38, s)` with s the largest scale seen. When the largest integer part seen plus s
no longer fits in 38 digits, the column becomes StringType instead (exact text; never a
rounded fraction or an overflowed integer part). Both maxima only grow, so the fallback
is sticky.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, functions as F, types as T

_TYPE_RE = re.compile(r"^\s*([a-z]+)\s*(?:\(([^)]*)\))?\s*(.*)$", re.DOTALL)
_DIGITS_RE = re.compile(r"^\d{1,4}$")
MAX_MYSQL_DECIMAL_PRECISION = 65
MAX_SPARK_PRECISION = 38
BINARY_BASES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}

# Type names official Canal writes verbatim from the DDL (`FIXED(40,3)`, `DEC(8,2)`).
_SYNONYMS = {"fixed": "decimal", "dec": "decimal"}


@dataclass(frozen=True)
class MysqlType:
    base: str
    params: tuple[str, ...]
    unsigned: bool

    @property
    def decimal_params(self) -> tuple[int, int] | None:
        """Declared (precision, scale) of a decimal; None without or with invalid parameters."""
        if self.base not in ("decimal", "numeric") or len(self.params) not in (1, 2):
            return None
        if not all(_DIGITS_RE.match(p) for p in self.params):
            return None
        precision = int(self.params[0])
        scale = int(self.params[1]) if len(self.params) == 2 else 0
        if not 1 <= precision <= MAX_MYSQL_DECIMAL_PRECISION or scale > precision:
            return None
        return precision, scale


def parse_mysql_type(text: str | None) -> MysqlType:
    m = _TYPE_RE.match(text.lower() if isinstance(text, str) else "")
    if not m:
        return MysqlType("unknown", (), False)
    base, params, rest = m.groups()
    if rest.startswith("("):  # an unclosed parameter list: `decimal(10,2`
        return MysqlType("unknown", (), False)
    plist = tuple(p.strip() for p in params.split(",")) if params else ()
    if base == "serial":  # MySQL alias: BIGINT UNSIGNED NOT NULL AUTO_INCREMENT
        return MysqlType("bigint", (), True)
    base = _SYNONYMS.get(base, base)
    return MysqlType(base, plist, "unsigned" in rest or "unsigned" in base)


def spark_type(mtype: MysqlType, inferred_scale: int = 0, inferred_integer_digits: int = 0) -> T.DataType:
    """The Spark type of a column; inferred_* only matter for decimals without parameters."""
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
        if mtype.params:
            declared = mtype.decimal_params
            if declared is None or declared[0] > MAX_SPARK_PRECISION:  # invalid, or wider than Spark
                return T.StringType()
            return T.DecimalType(*declared)
        # No declared parameters (TiCDC's default canal-json): keep every digit seen.
        scale, integer_digits = max(int(inferred_scale or 0), 0), max(int(inferred_integer_digits or 0), 0)
        if scale + integer_digits > MAX_SPARK_PRECISION:
            return T.StringType()
        return T.DecimalType(MAX_SPARK_PRECISION, scale)
    if b == "float":
        # FLOAT(p) with p in 25..53 is MySQL's DOUBLE (FLOAT(M,D) stays single precision)
        p = mtype.params
        return T.DoubleType() if len(p) == 1 and _DIGITS_RE.match(p[0]) and int(p[0]) > 24 else T.FloatType()
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
    if isinstance(dtype, T.BooleanType):
        # BOOL is TINYINT(1): it stores 2 or -1 as well, and MySQL reads any non-zero as TRUE
        return F.coalesce(value.try_cast(T.LongType()) != 0, value.try_cast(dtype))
    return value.try_cast(dtype)


def typed_value_sql(value: str, dtype: T.DataType) -> str:
    """`typed_value` as SQL text over the SQL expression `value` (common/sql_text: the
    snapshot builds it per table and column; a test holds the two forms equal)."""
    if isinstance(dtype, T.BinaryType):
        return f"try_to_binary({value}, 'base64')"
    if isinstance(dtype, T.BooleanType):
        return f"coalesce(try_cast({value} AS BIGINT) != 0, try_cast({value} AS BOOLEAN))"
    return f"try_cast({value} AS {dtype.simpleString()})"


def is_decimal_without_params(mtype: MysqlType) -> bool:
    return mtype.base in ("decimal", "numeric") and not mtype.params

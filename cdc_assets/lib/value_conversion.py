"""Row events whose values do not convert to their column's type go to quarantine.

Every decoder turns values into canonical text and names each column's MySQL type; the
snapshot later casts the text to the exact Spark type (`mysql_types`). An event with a
value that cannot be cast (text in an INT column, 300 in a DECIMAL(4,2), bad base64 for
a BLOB) is quarantined here, as `invalid_value` with the columns named, instead of
becoming a null in the snapshot. Protocol-agnostic: it runs on every decoder's output.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.lib.changelog_schema import REJECT_DETAIL, REJECT_REASON, ROW
from cdc_assets.lib.mysql_types import is_decimal_without_params, parse_mysql_type, spark_type, typed_value

INVALID_VALUE = "invalid_value"


def _checked_types(events: DataFrame) -> dict[str, T.DataType]:
    """The distinct type texts of the row events (a handful) that constrain their values."""
    texts = [r[0] for r in events.where(F.col("event_kind") == ROW)
             .select(F.explode(F.map_values("column_types"))).distinct().collect() if r[0] is not None]
    out = {}
    for text in texts:
        mtype = parse_mysql_type(text)
        dtype = spark_type(mtype)
        # Text types hold anything; decimals without parameters are typed from the data.
        if not isinstance(dtype, T.StringType) and not is_decimal_without_params(mtype):
            out[text] = dtype
    return out


def _converts(value: Column, type_text: Column, types: dict[str, T.DataType]) -> Column:
    case = None
    for text, dtype in types.items():
        ok = typed_value(value, dtype).isNotNull()
        case = F.when(type_text == text, ok) if case is None else case.when(type_text == text, ok)
    return value.isNull() | case.otherwise(F.lit(True))


def _bad_columns(image: str, types: dict[str, T.DataType]) -> Column:
    return F.filter(
        F.coalesce(F.map_keys(image), F.array().cast("array<string>")),
        lambda k: ~_converts(F.try_element_at(F.col(image), k), F.try_element_at(F.col("column_types"), k), types),
    )


def quarantine_unconvertible_values(decoded: DataFrame) -> DataFrame:
    """`decoded` (a decoder's output) with `invalid_value` rejects for row events holding a
    value that does not convert to its column's type; other rows unchanged."""
    types = _checked_types(decoded.where(F.col(REJECT_REASON).isNull()))
    if not types:
        return decoded
    bad = F.array_distinct(F.concat(_bad_columns("before", types), _bad_columns("after", types)))
    failing = F.col(REJECT_REASON).isNull() & (F.col("event_kind") == ROW) & (F.size(bad) > 0)
    return decoded.withColumns({
        REJECT_REASON: F.when(failing, F.lit(INVALID_VALUE)).otherwise(F.col(REJECT_REASON)),
        REJECT_DETAIL: F.when(failing, F.concat(F.lit("value does not convert to its column type: "),
                                                F.array_join(bad, ","))).otherwise(F.col(REJECT_DETAIL)),
    })

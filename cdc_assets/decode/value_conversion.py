"""The last, protocol-agnostic step of decoding: canonical values, then the quarantine of
row events whose values do not convert to their column's type.

Every decoder turns values into canonical text and names each column's MySQL type; the
snapshot later casts the text to the exact Spark type (`mysql_types`). Two forms still
differ between producers and are made canonical here, for every protocol alike
(docs/types.md):

- TIME: `[-]HH:MM:SS` plus `.ffffff` (6 digits) when the fraction is not zero. TiDB prints
  the column's fsp digits (`01:00:00.000`), Debezium a number of microseconds.
- Zero dates (`0000-00-00`, `0000-00-00 00:00:00[.000]`) in DATE / DATETIME / TIMESTAMP
  columns: NULL, as Debezium writes them. No Spark date can hold them.

An event with a value that cannot be cast (text in an INT column, 300 in a DECIMAL(4,2),
bad base64 for a BLOB) is quarantined, as `invalid_value` with the columns named, instead
of becoming a null in the snapshot.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.common.mysql_types import is_decimal_without_params, parse_mysql_type, spark_type, typed_value
from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON, ROW

INVALID_VALUE = "invalid_value"


_ZERO_DATE_TYPES = ("date", "datetime", "timestamp")
_TIME_TEXT = r"^(-?)(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$"


def _type_texts(events: DataFrame) -> list[str]:
    """The distinct type texts of the row events (a handful)."""
    return [r[0] for r in events.where(F.col("event_kind") == ROW)
            .select(F.explode(F.map_values("column_types"))).distinct().collect() if r[0] is not None]


def canonical_time(v: Column) -> Column:
    """TIME text -> `[-]HH:MM:SS[.ffffff]`; text of another shape is left as it is."""
    def group(i: int) -> Column:
        return F.regexp_extract(v, _TIME_TEXT, i)

    hours = group(2)
    fraction = F.rpad(group(5), 6, "0")
    text = F.concat(
        group(1), F.lpad(hours, F.greatest(F.length(hours), F.lit(2)), "0"), F.lit(":"), group(3), F.lit(":"),
        group(4), F.when(fraction.rlike("[1-9]"), F.concat(F.lit("."), fraction)).otherwise(F.lit("")),
    )
    return F.when(v.rlike(_TIME_TEXT), text).otherwise(v)


def canonical_values(decoded: DataFrame, type_texts: list[str]) -> DataFrame:
    """Before / after images with TIME text and zero dates made canonical (see module doc).
    Only when a row event of the batch has such a column: otherwise `decoded` unchanged."""
    bases = {parse_mysql_type(t).base for t in type_texts}
    has_time, has_dates = "time" in bases, bool(bases & set(_ZERO_DATE_TYPES))
    if not has_time and not has_dates:
        return decoded

    def base(k: Column) -> Column:
        return F.lower(F.regexp_extract(F.try_element_at(F.col("column_types"), k), r"^\s*([A-Za-z]+)", 1))

    def convert(k: Column, v: Column) -> Column:
        out = F.when(v.isNull(), v)
        if has_dates:  # the cheap test first: And stops at the first false. A key stays as it is.
            zero = v.startswith("0000-00-00") & base(k).isin(*_ZERO_DATE_TYPES)
            out = out.when(zero & ~F.coalesce(F.array_contains("pk_names", k), F.lit(False)),
                           F.lit(None).cast("string"))
        if has_time:
            out = out.when(base(k) == "time", canonical_time(v))
        return out.otherwise(v)

    def changes(image: str) -> Column:
        """Whether the image may change: rebuilding every map would cost the common case
        (DATETIME columns, no zero dates) a copy of every row."""
        if has_time:
            return F.lit(True)
        return F.exists(F.map_values(image), lambda v: v.startswith("0000-00-00"))

    is_row = (F.col("event_kind") == ROW) & F.col("column_types").isNotNull()
    out = {
        image: F.when(is_row & F.coalesce(changes(image), F.lit(False)), F.transform_values(image, convert))
        .otherwise(F.col(image)) for image in ("before", "after")
    }
    if has_time:  # the key's text must stay the text of the key column in the images
        out["pk_values"] = F.when(is_row & F.col("pk_names").isNotNull(), F.zip_with(
            "pk_names", "pk_values", lambda k, v: F.when(base(k) == "time", canonical_time(v)).otherwise(v),
        )).otherwise(F.col("pk_values"))
    return decoded.withColumns(out)


def _checked_types(texts: list[str]) -> dict[str, T.DataType]:
    """The type texts that constrain their values, with their Spark types."""
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
    """The image's columns whose value does not convert, in the image's order. `map_zip_with`
    pairs each value with its type in one pass over both maps (keys of the image first, in
    its order); a lookup of the value and of the type per key made the check quadratic in
    the row's width. Keys only in `column_types` have a null value, which converts."""
    failed = F.map_zip_with(image, "column_types", lambda _k, value, text: ~_converts(value, text, types))
    return F.coalesce(F.map_keys(F.map_filter(failed, lambda _k, bad: bad)), F.array().cast("array<string>"))


def quarantine_unconvertible_values(decoded: DataFrame) -> DataFrame:
    """`decoded` (a decoder's output) with canonical values (`canonical_values`) and
    `invalid_value` rejects for row events holding a value that does not convert to its
    column's type; other rows unchanged."""
    texts = _type_texts(decoded.where(F.col(REJECT_REASON).isNull()))
    decoded = canonical_values(decoded, texts)
    types = _checked_types(texts)
    if not types:
        return decoded
    bad = F.array_distinct(F.concat(_bad_columns("before", types), _bad_columns("after", types)))
    failing = F.col(REJECT_REASON).isNull() & (F.col("event_kind") == ROW) & (F.size(bad) > 0)
    return decoded.withColumns({
        REJECT_REASON: F.when(failing, F.lit(INVALID_VALUE)).otherwise(F.col(REJECT_REASON)),
        REJECT_DETAIL: F.when(failing, F.concat(F.lit("value does not convert to its column type: "),
                                                F.array_join(bad, ","))).otherwise(F.col(REJECT_DETAIL)),
    })

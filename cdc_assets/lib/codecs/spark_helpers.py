"""Column helpers shared by the JSON decoders."""

from __future__ import annotations

from pyspark.sql import Column, functions as F

from cdc_assets.lib.changelog_schema import LINEAGE_FIELDS


def lineage_columns() -> list[str]:
    return [f.name for f in LINEAGE_FIELDS]


# Up to 9999-12-31: beyond that Spark's timestamp functions raise instead of returning null.
_MAX_EVENT_MS = 253_402_300_799_999


def event_time_from_ms(ms: Column) -> Column:
    """A producer's event time in ms -> timestamp; non-positive or absurd values -> null."""
    return F.timestamp_millis(F.when((ms > 0) & (ms <= _MAX_EVENT_MS), ms))


def blank_to_null(c: Column) -> Column:
    """Protocols write "" for "no database/table"; the change log says null."""
    return F.when(F.length(c) > 0, c)


def overlay(row: Column, old: Column) -> Column:
    """`row` with the columns present in `old` replaced by their old values: the before
    image when `old` may hold only the changed columns (official Canal, CloudCanal)."""
    return F.transform_values(
        row, lambda k, v: F.when(F.map_contains_key(old, k), F.try_element_at(old, k)).otherwise(v)
    )


def value_text() -> Column:
    """The Kafka value as text (invalid UTF-8 is caught separately by `is_valid_utf8`)."""
    return F.col("value").cast("string")


def invalid_json_reason() -> tuple[Column, Column]:
    """Tell malformed JSON apart from well-formed JSON of an unexpected shape."""
    malformed = F.try_parse_json(value_text()).isNull()
    return (
        F.when(malformed, F.lit("invalid_json")).otherwise(F.lit("unexpected_shape")),
        F.when(malformed, F.lit("the value is not valid JSON")).otherwise(
            F.lit("valid JSON, but a field has an unexpected type for this protocol")
        ),
    )


Rule = tuple[Column, "str | None", "Column | None"]


def first_failing_rule(rules: list[Rule]) -> tuple[Column, Column]:
    """(reason, detail) of the first rule whose condition holds; a rule with code None
    means "the JSON did not parse" and tells malformed JSON from an unexpected shape."""
    reason: Column = F.lit(None).cast("string")
    detail: Column = F.lit(None).cast("string")
    # Build the CASE from the last rule to the first so the first failing rule wins.
    for cond, code, text in reversed(rules):
        code_col, text_col = invalid_json_reason() if code is None else (F.lit(code), text)
        reason = F.when(cond, code_col).otherwise(reason)
        detail = F.when(cond, text_col).otherwise(detail)
    return reason, detail

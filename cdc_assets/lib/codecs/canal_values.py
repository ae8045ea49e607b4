"""Canal-style column values as Spark expressions (CloudCanal's decoder; Canal-JSON does
the same per message in Python, `canal_json_events.py`): binary columns written as
ISO-8859-1 text, TIMESTAMP wall clocks, ENUM / SET codes."""

from __future__ import annotations

from pyspark.sql import Column, functions as F, types as T

_ROW_MAP = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)
_BINARY_TYPE_PATTERN = (
    r"^\s*((var)?binary|(tiny|medium|long)?blob|geometry|point|linestring|polygon"
    r"|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)\b"
)
# `enum('a','b')` / `set('a','b')` -> the quoted member list (official Canal only).
_MEMBERS_PATTERN = r"^\s*(?i:enum|set)\s*\(\s*'(.*)'\s*\)\s*$"
_NOT_LATIN1 = r"[^\x00-\xff]"


def _is_binary_type(mysql_type: Column) -> Column:
    return F.coalesce(F.lower(mysql_type).rlike(_BINARY_TYPE_PATTERN), F.lit(False))


def _enum_or_set_name(v: Column, mysql_type: Column) -> Column:
    """Index (ENUM) / bit mask (SET) -> member name(s), when the type lists the members and
    the value is a number that is not itself a member; null otherwise."""
    # MySQL's type text doubles a quote inside a member: enum('it''s').
    members = F.transform(F.split(F.regexp_extract(mysql_type, _MEMBERS_PATTERN, 1), "','"),
                          lambda m: F.replace(m, F.lit("''"), F.lit("'")))
    number = v.try_cast("long")
    is_code = (F.regexp_extract(mysql_type, _MEMBERS_PATTERN, 1) != "") & number.isNotNull() & ~F.array_contains(
        members, v
    )
    enum_name = F.try_element_at(members, F.when(number > 0, number.cast("int")))
    set_names = F.array_join(
        F.filter(members, lambda _, i: F.call_function("shiftright", number, i).bitwiseAND(F.lit(1)) == 1), ","
    )
    is_enum = F.lower(mysql_type).rlike(r"^\s*enum")
    return F.when(is_code, F.when(is_enum, enum_name).otherwise(set_names))


def type_flags(types: Column, time_zone: str) -> tuple[Column, Column]:
    """(a column has a binary type, a column has a type `canonical_values` may change) for a
    message's `mysqlType` map. Computed once per message, they let the common message (plain
    types only) skip the per-value regular expressions below."""
    names = F.coalesce(F.map_values(types), F.array().cast(T.ArrayType(T.StringType())))
    has_binary = F.exists(names, _is_binary_type)

    def changes_values(t: Column) -> Column:
        out = _is_binary_type(t) | F.coalesce(F.regexp_extract(t, _MEMBERS_PATTERN, 1) != "", F.lit(False))
        if time_zone.upper() != "UTC":
            out = out | F.coalesce(F.lower(t).startswith("timestamp"), F.lit(False))
        return out

    return has_binary, F.exists(names, changes_values)


def canonical_values(row: Column, types: Column, time_zone: str, changes: Column | None = None) -> Column:
    """Binary columns: ISO-8859-1 text -> exact bytes -> base64. TIMESTAMP columns: the
    changefeed's wall clock -> UTC. ENUM/SET codes -> names. Others unchanged.

    `changes`: `type_flags(...)[1]` when the caller computed it once per message."""

    def convert(k: Column, v: Column) -> Column:
        mysql_type = F.try_element_at(types, k)
        coded_name = _enum_or_set_name(v, mysql_type)
        out = F.when(coded_name.isNotNull(), coded_name).when(
            # A non-Latin-1 value cannot be bytes: left as is, the event is quarantined.
            _is_binary_type(mysql_type) & ~v.rlike(_NOT_LATIN1),
            F.base64(F.encode(v, "ISO-8859-1")),
        )
        if time_zone.upper() != "UTC":
            out = out.when(
                F.lower(mysql_type).startswith("timestamp"),
                F.date_format(F.to_utc_timestamp(v, time_zone), "yyyy-MM-dd HH:mm:ss.SSSSSS"),
            )
        return out.otherwise(v)

    if changes is None:
        changes = type_flags(types, time_zone)[1]
    return F.when(changes, F.transform_values(row, convert)).otherwise(row)


def has_non_latin1_binary(row: Column, types: Column, has_binary: Column | None = None) -> Column:
    """`has_binary`: `type_flags(...)[0]` when the caller computed it once per message."""
    entries = F.map_entries(F.coalesce(row, F.create_map().cast(_ROW_MAP)))
    bad = F.exists(
        entries,
        lambda e: _is_binary_type(F.try_element_at(types, e["key"]))
        & F.coalesce(e["value"].rlike(_NOT_LATIN1), F.lit(False)),
    )
    if has_binary is None:
        has_binary = type_flags(types, "UTC")[0]
    return F.when(has_binary, bad).otherwise(F.lit(False))

"""TiCDC Canal-JSON (with or without the `_tidb` extension), also official-Canal shaped `old`.

Spec: shared/specs/ticdc-canal-json.txt. Rules implemented here:
- `isDdl` true => DDL; else `type == "TIDB_WATERMARK"` => watermark; else a DML row event.
- one message may carry several rows in `data` (official Canal batches them); `old[i]`
  pairs with `data[i]` and may hold only the changed columns, so the before image is
  `data[i]` overlaid with `old[i]`.
- TiCDC writes binary columns as ISO-8859-1 text (byte b -> code point b); we turn them
  back into the exact bytes (canonical base64 in the change log).
- commit_ts is `_tidb.commitTs`; without the extension it is derived from `es << 18`
  (millisecond precision only) and official Canal's batch `id` (> 0; TiCDC writes 0)
  becomes `source_position`, so that a later batch wins a tie on `es`.
- official Canal (Paimon/Flink corpora): geometry values are MySQL's internal bytes as
  ISO-8859-1 text like binary ones; ENUM / SET may arrive as index / bit mask, which are
  mapped to the names listed in a parameterised `mysqlType` (`enum('a','b')`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.lib.changelog_schema import (
    CHANGE_LOG_COLUMNS,
    DDL,
    DECODED_COLUMNS,
    REJECT_DETAIL,
    REJECT_REASON,
    ROW,
    WATERMARK,
)
from cdc_assets.lib.codecs.base import Decoder
from cdc_assets.lib.codecs.spark_helpers import (
    blank_to_null,
    event_time_from_ms,
    first_failing_rule,
    lineage_columns,
    overlay,
    value_text,
)
from cdc_assets.lib.tso import PHYSICAL_SHIFT, tso_time_col

_ROW_MAP = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)
_TIDB = T.StructType(
    [
        T.StructField("commitTs", T.LongType()),
        T.StructField("watermarkTs", T.LongType()),
    ]
)
_ROUTING_SCHEMA = T.StructType(
    [
        T.StructField("isDdl", T.BooleanType()),
        T.StructField("type", T.StringType()),
        T.StructField("es", T.LongType()),
        T.StructField("_tidb", _TIDB),
    ]
)
# Only the fields we use: Spark's JSON reader skips the rest (sqlType, id, ts, ...).
_MESSAGE_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("database", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("pkNames", T.ArrayType(T.StringType())),
        T.StructField("isDdl", T.BooleanType()),
        T.StructField("type", T.StringType()),
        T.StructField("es", T.LongType()),
        T.StructField("sql", T.StringType()),
        T.StructField("mysqlType", _ROW_MAP),
        T.StructField("data", T.ArrayType(_ROW_MAP)),
        T.StructField("old", T.ArrayType(_ROW_MAP)),
        T.StructField("_tidb", _TIDB),
        T.StructField("_corrupt", T.StringType()),
    ]
)
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
_DML_TYPES = ("INSERT", "UPDATE", "DELETE")
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


class CanalJsonDecoder(Decoder):
    name = "canal-json"
    default_options = {
        # TiCDC option names. The extension adds `_tidb.commitTs` and TIDB_WATERMARK.
        "enable-tidb-extension": "true",
        "content-compatible": "false",
        "only-output-updated-columns": "false",
    }

    def emits_watermarks(self) -> bool:
        return self.flag("enable-tidb-extension")

    def route(self, raw: DataFrame) -> DataFrame:
        m = F.from_json(value_text(), _ROUTING_SCHEMA)
        tidb = m["_tidb"]
        is_watermark = F.coalesce(~m["isDdl"], F.lit(True)) & (m["type"] == "TIDB_WATERMARK")
        return raw.withColumns(
            {
                "routing_ms": F.coalesce(
                    F.shiftright(tidb["commitTs"], PHYSICAL_SHIFT),
                    F.shiftright(tidb["watermarkTs"], PHYSICAL_SHIFT),
                    m["es"],
                    F.unix_millis(F.col("kafka_timestamp")),
                ),
                "watermark_ts": F.when(is_watermark, tidb["watermarkTs"]),
            }
        )

    def decode(self, raw: DataFrame) -> DataFrame:
        parsed = raw.select(
            *lineage_columns(),
            "key",
            "value",
            F.from_json(value_text(), _MESSAGE_SCHEMA, _JSON_OPTIONS).alias("m"),
        )
        m = F.col("m")
        is_ddl = F.coalesce(m["isDdl"], F.lit(False))
        is_watermark = ~is_ddl & (m["type"] == "TIDB_WATERMARK")
        kind = F.when(is_ddl, F.lit(DDL)).when(is_watermark, F.lit(WATERMARK)).otherwise(F.lit(ROW))
        # One output row per element of `data` for DML; exactly one row otherwise.
        rows = F.when(
            (kind == ROW) & (F.size(m["data"]) > 0), m["data"]
        ).otherwise(F.array(F.lit(None).cast(_ROW_MAP)))
        has_binary, changes = type_flags(m["mysqlType"], self.options["time-zone"])
        exploded = parsed.select(
            "*", kind.alias("_kind"), has_binary.alias("_has_binary"), changes.alias("_changes"),
            F.posexplode(rows).alias("_pos", "_row"),
        )

        types = m["mysqlType"]
        op = F.upper(m["type"])
        row = F.col("_row")
        old = F.try_element_at(m["old"], F.col("_pos") + 1)
        before_raw = (
            F.when(op == "DELETE", row)
            .when((op == "UPDATE") & old.isNotNull(), overlay(row, old))
        )
        after_raw = F.when(op.isin("INSERT", "UPDATE"), row)
        pk_names = m["pkNames"]
        commit_ts = F.coalesce(
            m["_tidb"]["commitTs"], F.shiftleft(m["es"], PHYSICAL_SHIFT)
        )
        events = exploded.select(
            *lineage_columns(),
            "key",
            "value",
            "m",
            "_kind",
            F.col("_pos").cast("int").alias("event_index"),
            F.when(F.col("_kind") == ROW, op).alias("op"),
            blank_to_null(m["database"]).alias("database"),
            blank_to_null(m["table"]).alias("table"),
            F.when(F.col("_kind") != WATERMARK, commit_ts).alias("commit_ts"),
            F.when(F.col("_kind") == ROW, pk_names).alias("pk_names"),
            canonical_values(before_raw, types, self.options["time-zone"], F.col("_changes")).alias("before"),
            canonical_values(after_raw, types, self.options["time-zone"], F.col("_changes")).alias("after"),
            F.when(F.col("_kind") == ROW, types).alias("column_types"),
            F.when(F.col("_kind") == DDL, m["type"]).alias("ddl_type"),
            F.when(F.col("_kind") == DDL, m["sql"]).alias("ddl_sql"),
            F.when(F.col("_kind") == WATERMARK, m["_tidb"]["watermarkTs"]).alias("watermark_ts"),
            has_non_latin1_binary(row, types, F.col("_has_binary")).alias("_bad_binary"),
        )
        pk_values = F.transform(
            F.col("pk_names"),
            lambda n: F.coalesce(
                F.try_element_at(F.col("after"), n), F.try_element_at(F.col("before"), n)
            ),
        )
        events = events.withColumn("pk_values", pk_values)
        reason, detail = self._reject(events)
        return events.select(
            *[c for c in CHANGE_LOG_COLUMNS
              if c not in ("commit_time", "event_time", "event_kind", "source_position")],
            F.col("_kind").alias("event_kind"),
            F.when((F.col("_kind") != WATERMARK) & F.col("m")["_tidb"]["commitTs"].isNull()
                   & (F.col("m")["id"] > 0), F.col("m")["id"]).alias("source_position"),
            tso_time_col(F.col("commit_ts")).alias("commit_time"),
            event_time_from_ms(F.col("m")["es"]).alias("event_time"),
            "key",
            "value",
            reason.alias(REJECT_REASON),
            detail.alias(REJECT_DETAIL),
        ).select(*DECODED_COLUMNS)

    @staticmethod
    def _reject(events: DataFrame) -> tuple[Column, Column]:
        """First failing rule wins: (reason code, human detail)."""
        m = F.col("m")
        kind = F.col("_kind")
        is_row = kind == ROW
        rules: list[tuple[Column, str, Column]] = [
            (F.col("value").isNull() | (F.length("value") == 0), "empty_message",
             F.lit("the Kafka message has no value")),
            (~F.is_valid_utf8("value"), "invalid_utf8", F.lit("the value is not valid UTF-8")),
            (m.isNull() | m["_corrupt"].isNotNull(), None, None),  # filled below
            ((kind == WATERMARK) & F.col("watermark_ts").isNull(), "missing_watermark_ts",
             F.lit("TIDB_WATERMARK without _tidb.watermarkTs")),
            (is_row & ~F.upper(m["type"]).isin(*_DML_TYPES), "unknown_event_type",
             F.concat(F.lit("unknown canal-json type "), F.coalesce(m["type"], F.lit("null")))),
            (is_row & F.coalesce(F.size(m["data"]) <= 0, F.lit(True)), "missing_row_data",
             F.lit("DML message without data rows")),
            ((kind != WATERMARK) & F.col("commit_ts").isNull(), "missing_commit_ts",
             F.lit("no _tidb.commitTs and no es")),
            ((kind == DDL) & blank_to_null(F.trim("ddl_sql")).isNull(), "missing_ddl_sql",
             F.lit("DDL message without sql")),
            (is_row & (F.col("database").isNull() | F.col("table").isNull()), "missing_table_name",
             F.lit("DML message without database or table")),
            (is_row & F.coalesce(F.size(F.col("pk_names")) <= 0, F.lit(True)), "missing_primary_key",
             F.lit("DML message without pkNames")),
            (is_row & F.exists(F.col("pk_values"), lambda v: v.isNull()), "null_primary_key",
             F.concat(F.lit("a primary key column is null or absent: "),
                      F.array_join(F.col("pk_names"), ","))),
            (is_row & F.col("_bad_binary"), "invalid_binary_value",
             F.lit("a binary column holds characters beyond ISO-8859-1")),
        ]
        return first_failing_rule(rules)

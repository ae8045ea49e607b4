"""Debezium JSON envelopes: TiCDC's `debezium` protocol and Debezium's own (`debezium-json`).

Specs: shared/specs/ticdc-debezium.txt, cloudcanal-message-formats.txt ("Debezium
Envelope"), debezium.io MySQL connector. One message = one event; the value is
`{"schema": ..., "payload": ...}`, `{"payload": ...}` (TiCDC `debezium-disable-schema`)
or the bare payload (Kafka Connect `schemas.enable=false`); the shape is detected per
message, so `debezium-disable-schema` / `debezium-output-old-value` are accepted for
sink-URI parity only; `enable-tidb-extension` says whether watermarks will come. The
`time-zone` option is not needed: Debezium carries TIMESTAMP as a UTC instant
(ZonedTimestamp) and DATETIME as the wall clock.

- `op`: c (CloudCanal: i) INSERT, u UPDATE, d DELETE, r READ (snapshot);
  m = TiCDC watermark (checkpoint, `source.commit_ts`); a (CloudCanal ALTER) or no `op`
  with a `ddl` field = DDL. TRUNCATE comes with empty `tableChanges`: the SQL is kept.
- The JSON is parsed into a VARIANT, not with from_json: from_json re-prints numbers
  through a double (9999999999.99 -> "9.99999999999E9") and cannot tell the base64
  string of a Connect Decimal from a JSON number. Values: see `debezium_values`.
- commit_ts: `source.commit_ts` (TiCDC). `debezium-json` without it derives
  `source.ts_ms << 18` (`payload.ts_ms` when the source time is 0, as in Debezium 1.x
  snapshots) and puts the binlog order (`file` number << 32 | `pos`) in source_position.
- Primary key: the Kafka key's fields (key schema order, else key payload order);
  without a usable key, the `primary-key` option (comma list, for every table). DDL
  events report `tableChanges[0].table.primaryKeyColumnNames`; rows do not borrow it
  (that would need state across messages and windows).
- A Kafka tombstone (null value after a delete, for log compaction) carries no change:
  quarantined as `tombstone` so it is counted, meaning "expected, nothing to apply".
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.lib.changelog_schema import (
    CHANGE_LOG_COLUMNS,
    DDL,
    DECODED_COLUMNS,
    DELETE,
    INSERT,
    READ,
    REJECT_DETAIL,
    REJECT_REASON,
    ROW,
    UPDATE,
    WATERMARK,
)
from cdc_assets.lib.codecs.base import Decoder
from cdc_assets.lib.codecs.debezium_values import (
    ENVELOPE_FIELDS,
    canonical_values,
    column_type,
    is_null_value,
    value_kind_type,
    value_rule,
)
from cdc_assets.lib.codecs.spark_helpers import (
    Rule,
    blank_to_null,
    event_time_from_ms,
    first_failing_rule,
    lineage_columns,
    value_text,
)
from cdc_assets.lib.tso import PHYSICAL_SHIFT, tso_time_col

ROW_OPS = {"c": INSERT, "i": INSERT, "u": UPDATE, "d": DELETE, "r": READ}
WATERMARK_OP, DDL_OP = "m", "a"
_SOURCE = T.StructType(
    [
        T.StructField("commit_ts", T.LongType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("db", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("file", T.StringType()),
        T.StructField("pos", T.LongType()),
    ]
)
_TABLE_CHANGE = T.StructType(
    [
        T.StructField("type", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField("table", T.StructType([
            T.StructField("primaryKeyColumnNames", T.ArrayType(T.StringType())),
            T.StructField("columns", T.ArrayType(T.StructType([
                T.StructField("name", T.StringType()), T.StructField("typeName", T.StringType()),
                T.StructField("length", T.LongType()), T.StructField("scale", T.LongType()),
            ]))),
        ])),
    ]
)
_ROW = "map<string,variant>"
_ROUTE_SOURCE = "struct<commit_ts:bigint,ts_ms:bigint>"
_ROUTE_SCHEMA = (
    f"struct<payload:struct<op:string,ts_ms:bigint,source:{_ROUTE_SOURCE}>,"
    f"op:string,ts_ms:bigint,source:{_ROUTE_SOURCE}>"
)
_KEY_SCHEMA = "struct<payload:map<string,string>,schema:struct<fields:array<struct<field:string>>>>"
_MAX_MS = 1 << 45  # ms << 18 must stay a positive long



def _positive(c: Column) -> Column:
    return F.when(c > 0, c)


def _bad_columns(raw: Column, image: Column) -> Column:
    """Columns whose non-null value did not convert (bad base64, out-of-range time, ...)."""
    bad = F.filter(
        F.map_keys(raw),
        lambda k: ~is_null_value(F.try_element_at(raw, k)) & F.try_element_at(image, k).isNull(),
    )
    return F.coalesce(bad, F.array().cast("array<string>"))



_SIZED_TYPES = r"^(decimal|numeric|char|varchar|binary|varbinary|bit|datetime|timestamp|time|float|double)$"


def _declared_columns(change: Column) -> Column:
    """A schema-change event's `tableChanges[0].table.columns` as name -> MySQL type text, in
    column order (the table after the DDL); null when the event carries no structure."""
    columns = change["table"]["columns"]

    def type_text(c: Column) -> Column:
        base = F.lower(F.trim(c["typeName"]))
        first = F.split(base, " ").getItem(0)
        rest = F.trim(F.substring(base, F.length(first) + 1, 1000))
        sized = first.rlike(_SIZED_TYPES) & c["length"].isNotNull() & (c["length"] >= 0)
        params = F.concat(F.lit("("), c["length"].cast("string"),
                          F.when(c["scale"].isNotNull() & first.rlike("^(decimal|numeric|float|double)$"),
                                 F.concat(F.lit(","), c["scale"].cast("string"))).otherwise(F.lit("")), F.lit(")"))
        return F.trim(F.concat_ws(" ", F.when(sized, F.concat(first, params)).otherwise(first), rest))

    names = F.transform(columns, lambda c: c["name"])
    ok = ((F.size(columns) > 0) & (F.size(F.array_distinct(names)) == F.size(names))
          & F.forall(columns, lambda c: c["name"].isNotNull() & c["typeName"].isNotNull()))
    return F.when(ok, F.map_from_arrays(names, F.transform(columns, type_text)))


class DebeziumDecoder(Decoder):
    """TiCDC's Debezium protocol: commit_ts is `source.commit_ts` (required)."""

    name = "debezium"
    default_options = {
        # TiCDC sends checkpoint (watermark) events only with the extension on.
        "enable-tidb-extension": "true",
        # TiCDC sink-URI options, accepted for parity (the shape is detected per message).
        "debezium-disable-schema": "false",
        "debezium-output-old-value": "true",
        # Primary-key columns (comma list) for messages whose Kafka key has none.
        "primary-key": "",
    }
    #: Plain Debezium has no TSO: derive commit_ts from the source time.
    derive_commit_ts = False

    def emits_watermarks(self) -> bool:
        return self.flag("enable-tidb-extension")

    def _commit_ts(self, source: Column, ts_ms: Column) -> Column:
        if not self.derive_commit_ts:
            return source["commit_ts"]
        ms = F.coalesce(_positive(source["ts_ms"]), _positive(ts_ms))
        derived = F.when(ms < _MAX_MS, F.shiftleft(ms, PHYSICAL_SHIFT))
        return F.coalesce(source["commit_ts"], derived)

    def route(self, raw: DataFrame) -> DataFrame:
        m = F.from_json(value_text(), _ROUTE_SCHEMA)
        p = m["payload"]
        op = F.coalesce(p["op"], m["op"])
        source = F.struct(
            F.coalesce(p["source"]["commit_ts"], m["source"]["commit_ts"]).alias("commit_ts"),
            F.coalesce(p["source"]["ts_ms"], m["source"]["ts_ms"]).alias("ts_ms"),
        )
        ts_ms = F.coalesce(p["ts_ms"], m["ts_ms"])
        commit_ts = self._commit_ts(source, ts_ms)
        return raw.withColumns(
            {
                "routing_ms": F.coalesce(
                    F.shiftright(commit_ts, PHYSICAL_SHIFT),
                    _positive(source["ts_ms"]),
                    _positive(ts_ms),
                    F.unix_millis(F.col("kafka_timestamp")),
                ),
                "watermark_ts": F.when(op == WATERMARK_OP, source["commit_ts"]),
            }
        )

    def _key_names(self) -> Column:
        """Primary-key names from the Kafka key; else the `primary-key` option."""
        key = F.col("key").cast("string")
        enveloped = F.from_json(key, _KEY_SCHEMA)
        bare = F.from_json(key, "map<string,string>")
        from_key = F.coalesce(
            enveloped["schema"]["fields"]["field"],
            F.map_keys(enveloped["payload"]),
            F.when(~F.map_contains_key(bare, "payload"), F.map_keys(bare)),
        )
        option = [c.strip() for c in self.options["primary-key"].split(",") if c.strip()]
        fallback = F.array(*[F.lit(c) for c in option]) if option else F.lit(None).cast("array<string>")
        return F.coalesce(F.when(F.size(from_key) > 0, from_key), fallback)

    def decode(self, raw: DataFrame) -> DataFrame:
        v = F.try_parse_json(value_text())
        parsed = raw.select(*lineage_columns(), "key", "value", v.alias("v")).select(
            "*", F.coalesce(F.try_variant_get("v", "$.payload", "variant"), F.col("v")).alias("p")
        )
        p = F.col("p")
        schemas = F.try_variant_get("v", "$.schema.fields", ENVELOPE_FIELDS.simpleString())
        row_fields = F.coalesce(
            F.try_element_at(F.filter(schemas, lambda s: s["field"] == "after"), F.lit(1))["fields"],
            F.try_element_at(F.filter(schemas, lambda s: s["field"] == "before"), F.lit(1))["fields"],
        )
        changes = F.coalesce(
            F.try_variant_get(p, "$.tableChanges", f"array<{_TABLE_CHANGE.simpleString()}>"),
            F.array(F.try_variant_get(p, "$.tableChanges", _TABLE_CHANGE.simpleString())),  # CloudCanal: object
        )
        fields = parsed.select(
            *lineage_columns(), "key", "value", "v",
            F.try_variant_get(p, "$", "struct<op:string>").isNotNull().alias("_is_object"),
            F.try_variant_get(p, "$.op", "string").alias("_op"),
            F.try_variant_get(p, "$.source", _SOURCE.simpleString()).alias("_source"),
            F.try_variant_get(p, "$.ts_ms", "bigint").alias("_ts_ms"),
            F.try_variant_get(p, "$.ddl", "string").alias("_ddl"),
            F.try_variant_get(p, "$.databaseName", "string").alias("_database_name"),
            F.try_element_at(changes, F.lit(1)).alias("_change"),
            F.try_variant_get(p, "$.before", _ROW).alias("_before_raw"),
            F.try_variant_get(p, "$.after", _ROW).alias("_after_raw"),
            row_fields.alias("_fields"),
            self._key_names().alias("_key_names"),
        )
        return self._events(fields)

    def _events(self, df: DataFrame) -> DataFrame:
        op, ddl = F.col("_op"), F.col("_ddl")
        is_ddl = (op == DDL_OP) | (op.isNull() & ddl.isNotNull())
        kind = F.when(is_ddl, F.lit(DDL)).when(op == WATERMARK_OP, F.lit(WATERMARK)).otherwise(F.lit(ROW))
        row_op = F.lit(None).cast("string")
        for code, name in ROW_OPS.items():
            row_op = F.when(op == code, F.lit(name)).otherwise(row_op)
        names = F.transform("_fields", lambda f: f["field"])
        fields_ok = F.coalesce(
            (F.size(F.array_distinct(names)) == F.size(names)) & ~F.exists(names, lambda n: n.isNull()),
            F.lit(True),
        )
        staged = df.select(
            "*", kind.alias("_kind"), row_op.alias("_row_op"), fields_ok.alias("_fields_ok"),
            F.when(fields_ok, F.map_from_arrays(names, F.col("_fields"))).alias("_field_map"),
        )
        is_row, row_op, field_map = F.col("_kind") == ROW, F.col("_row_op"), F.col("_field_map")
        nonempty = lambda c: F.when(F.size(c) > 0, F.col(c))  # noqa: E731  CloudCanal: before {} = none
        staged = staged.select(
            "*",
            F.when(is_row & row_op.isin(UPDATE, DELETE), nonempty("_before_raw")).alias("_before_in"),
            F.when(is_row & row_op.isin(INSERT, UPDATE, READ), nonempty("_after_raw")).alias("_after_in"),
            F.transform_values(field_map, lambda k, f: value_rule(f)).alias("_rules"),
        )
        kind, source, change = F.col("_kind"), F.col("_source"), F.col("_change")
        before_in, after_in = F.col("_before_in"), F.col("_after_in")
        table_from_id = F.regexp_extract(change["id"], r'"([^"]*)"$', 1)
        ddl_type = F.coalesce(change["type"], F.upper(F.regexp_extract(ddl, r"^\s*(\w+)", 1)))
        events = staged.select(
            *lineage_columns(), "key", "value", "v", "_is_object", "_op", "_ddl", "_kind", "_before_in", "_after_in",
            F.lit(0).alias("event_index"),
            F.when(is_row, row_op).alias("op"),
            F.when(kind == DDL, blank_to_null(F.coalesce(F.col("_database_name"), source["db"])))
            .when(is_row, blank_to_null(source["db"])).alias("database"),
            F.when(kind == DDL, F.coalesce(blank_to_null(source["table"]), blank_to_null(table_from_id)))
            .when(is_row, blank_to_null(source["table"])).alias("table"),
            F.when(kind != WATERMARK, self._commit_ts(source, F.col("_ts_ms"))).alias("commit_ts"),
            self._source_position(source).alias("source_position"),
            event_time_from_ms(source["ts_ms"]).alias("event_time"),
            F.when(is_row, F.col("_key_names"))
            .when(kind == DDL, change["table"]["primaryKeyColumnNames"]).alias("pk_names"),
            # One conversion expression for both images (expression size matters, see debezium_values).
            F.transform(F.array(before_in, after_in), lambda m: canonical_values(m, F.col("_rules"))).alias("_images"),
            F.when(
                is_row,
                F.when(field_map.isNotNull(), F.transform_values(field_map, lambda k, f: column_type(f)))
                .otherwise(F.transform_values(F.coalesce(after_in, before_in), lambda k, x: value_kind_type(x))),
            ).when(kind == DDL, _declared_columns(change)).alias("column_types"),
            F.when(kind == DDL, ddl_type).alias("ddl_type"),
            F.when(kind == DDL, ddl).alias("ddl_sql"),
            F.when(kind == WATERMARK, source["commit_ts"]).alias("watermark_ts"),
            (F.col("_fields").isNotNull() & ~F.col("_fields_ok")).alias("_bad_schema"),
        )
        events = events.withColumns(
            {"before": F.col("_images")[0], "after": F.col("_images")[1]}
        ).drop("_images")
        pk_values = F.transform(
            "pk_names",
            lambda n: F.coalesce(F.try_element_at("after", n), F.try_element_at("before", n)),
        )
        events = events.withColumns(
            {
                "pk_values": F.when(F.col("_kind") == ROW, pk_values),
                "_bad_columns": F.array_union(
                    _bad_columns(F.col("_before_in"), F.col("before")),
                    _bad_columns(F.col("_after_in"), F.col("after")),
                ),
            }
        )
        reason, detail = self._reject(events)
        return events.select(
            *[c for c in CHANGE_LOG_COLUMNS if c not in ("event_kind", "commit_time")],
            F.col("_kind").alias("event_kind"),
            tso_time_col(F.col("commit_ts")).alias("commit_time"),
            "key",
            "value",
            reason.alias(REJECT_REASON),
            detail.alias(REJECT_DETAIL),
        ).select(*DECODED_COLUMNS)

    @staticmethod
    def _source_position(source: Column) -> Column:
        """MySQL binlog order: file number << 32 | position (null for TiCDC: file is "")."""
        file_no = F.regexp_extract(source["file"], r"(\d+)$", 1).try_cast("long")
        pos = source["pos"]
        ok = (F.length(source["file"]) > 0) & file_no.between(0, (1 << 31) - 1) & pos.between(0, (1 << 32) - 1)
        return F.when(ok, F.shiftleft(file_no, 32).bitwiseOR(pos))

    def _reject(self, events: DataFrame) -> tuple[Column, Column]:
        """First failing rule wins: (reason code, human detail)."""
        kind, op = F.col("_kind"), F.col("_op")
        is_row = kind == ROW
        empty_value = F.col("value").isNull() | (F.length("value") == 0)
        has_key = F.coalesce(F.length("key") > 0, F.lit(False))
        commit_hint = (
            "no source.ts_ms or ts_ms" if self.derive_commit_ts
            else "no source.commit_ts (Debezium's own connector: use protocol debezium-json)"
        )
        rules: list[Rule] = [
            (empty_value & has_key, "tombstone",
             F.lit("Kafka tombstone (null value after a delete, for log compaction): nothing to apply")),
            (empty_value, "empty_message", F.lit("the Kafka message has no value")),
            (~F.is_valid_utf8("value"), "invalid_utf8", F.lit("the value is not valid UTF-8")),
            (F.col("v").isNull(), None, None),  # invalid_json / unexpected_shape
            (~F.col("_is_object") | (op.isNull() & F.col("_ddl").isNull()), "unexpected_shape",
             F.lit("valid JSON, but not a Debezium change event (no op and no ddl)")),
            (is_row & F.col("op").isNull(), "unknown_event_type",
             F.concat(F.lit("unknown Debezium op "), op)),
            ((kind == WATERMARK) & F.col("watermark_ts").isNull(), "missing_watermark_ts",
             F.lit("watermark (op m) without source.commit_ts")),
            ((kind == DDL) & blank_to_null(F.trim("ddl_sql")).isNull(), "missing_ddl_sql", F.lit("DDL event without ddl")),
            ((kind != WATERMARK) & F.col("commit_ts").isNull(), "missing_commit_ts", F.lit(commit_hint)),
            (is_row & (F.col("database").isNull() | F.col("table").isNull()), "missing_table_name",
             F.lit("row event without source.db or source.table")),
            (is_row & F.col("before").isNull() & F.col("after").isNull(), "missing_row_data",
             F.concat(F.lit("op "), op, F.lit(" without its row image (after for c/r/u, before for d)"))),
            (is_row & F.col("_bad_schema"), "invalid_schema",
             F.lit("the row schema has duplicate or unnamed fields")),
            (is_row & F.coalesce(F.size("pk_names") <= 0, F.lit(True)), "missing_primary_key",
             F.lit("no key fields in the Kafka key and no primary-key option")),
            (is_row & F.exists("pk_values", lambda x: x.isNull()), "null_primary_key",
             F.concat(F.lit("a primary key column is null or absent: "), F.array_join("pk_names", ","))),
            (is_row & (F.size("_bad_columns") > 0), "invalid_value",
             F.concat(F.lit("value does not decode for its schema type: "), F.array_join("_bad_columns", ","))),
        ]
        return first_failing_rule(rules)


class DebeziumJsonDecoder(DebeziumDecoder):
    """Debezium's own connector (and CloudCanal's Debezium Envelope): no TSO, so
    commit_ts = source.ts_ms << 18 and the binlog position orders within a millisecond."""

    name = "debezium-json"
    default_options = {"primary-key": ""}
    derive_commit_ts = True

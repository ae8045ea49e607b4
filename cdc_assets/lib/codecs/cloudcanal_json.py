"""CloudCanal JSON (CloudCanal's default Kafka format).

Spec: shared/specs/cloudcanal-message-formats.txt (no public real sample exists). Rules:
- `isDdl` (the doc's example also spells it `ddl`) true => DDL (`action` = ALTER/CREATE...,
  `sql`); `entryType` TRANSACTIONEND => a transaction marker; else a DML row event
  (`action` INSERT/UPDATE/DELETE), one per element of `data`.
- `before[i]` pairs with `data[i]`: for UPDATE the before image is `data[i]` overlaid with
  `before[i]` (so a partial before image works too); for DELETE it is `before[i]` when
  present, else the deleted row in `data[i]`.
- values are text like Canal's (binary as ISO-8859-1 text, an assumption: the doc is silent);
  `dbValType` holds the source type names (`varchar(22)`) -> `column_types`.
- no TSO: commit_ts = `execTs << 18` (source SQL execution time, ms); the batch id `bid`
  (> 0) orders ties like official Canal's `id`.
- database = `db`, or `db.schema` when the source has schemas (PostgreSQL...).
- TRANSACTIONEND markers are decoded as watermark events at `execTs`; they only feed the
  landing watermark (route) with `transaction-end-as-watermark=true`, because a long
  transaction's rows carry older `execTs` than an earlier commit and would turn "late".
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.lib.changelog_schema import DDL, DECODED_COLUMNS, REJECT_DETAIL, REJECT_REASON, ROW, WATERMARK
from cdc_assets.lib.codecs.base import Decoder
from cdc_assets.lib.codecs.canal_values import canonical_values, has_non_latin1_binary
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
_ROUTING_SCHEMA = T.StructType(
    [T.StructField("entryType", T.StringType()), T.StructField("execTs", T.LongType())]
)
_MESSAGE_SCHEMA = T.StructType(
    [
        T.StructField("action", T.StringType()),
        T.StructField("bid", T.LongType()),
        T.StructField("before", T.ArrayType(_ROW_MAP)),
        T.StructField("data", T.ArrayType(_ROW_MAP)),
        T.StructField("db", T.StringType()),
        T.StructField("schema", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("dbValType", _ROW_MAP),
        T.StructField("entryType", T.StringType()),
        T.StructField("isDdl", T.BooleanType()),
        T.StructField("ddl", T.BooleanType()),
        T.StructField("pks", T.ArrayType(T.StringType())),
        T.StructField("execTs", T.LongType()),
        T.StructField("sql", T.StringType()),
        T.StructField("_corrupt", T.StringType()),
    ]
)
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
_DML_ACTIONS = ("INSERT", "UPDATE", "DELETE")
_TRANSACTION_END = "TRANSACTIONEND"




class CloudCanalJsonDecoder(Decoder):
    name = "cloudcanal-json"
    default_options = {
        # Let TRANSACTIONEND markers advance the landing watermark (see module docstring).
        "transaction-end-as-watermark": "false",
    }

    def emits_watermarks(self) -> bool:
        return self.flag("transaction-end-as-watermark")

    def route(self, raw: DataFrame) -> DataFrame:
        m = F.from_json(value_text(), _ROUTING_SCHEMA)
        use_markers = self.flag("transaction-end-as-watermark")
        is_marker = F.upper(m["entryType"]) == _TRANSACTION_END
        return raw.withColumns(
            {
                "routing_ms": F.coalesce(m["execTs"], F.unix_millis(F.col("kafka_timestamp"))),
                "watermark_ts": F.when(F.lit(use_markers) & is_marker, F.shiftleft(m["execTs"], PHYSICAL_SHIFT)),
            }
        )

    def decode(self, raw: DataFrame) -> DataFrame:
        parsed = raw.select(
            *lineage_columns(), "key", "value",
            F.from_json(value_text(), _MESSAGE_SCHEMA, _JSON_OPTIONS).alias("m"),
        )
        m = F.col("m")
        is_ddl = F.coalesce(m["isDdl"], m["ddl"], F.lit(False))
        is_marker = ~is_ddl & (F.upper(m["entryType"]) == _TRANSACTION_END)
        kind = F.when(is_ddl, F.lit(DDL)).when(is_marker, F.lit(WATERMARK)).otherwise(F.lit(ROW))
        rows = F.when((kind == ROW) & (F.size(m["data"]) > 0), m["data"]).otherwise(
            F.array(F.lit(None).cast(_ROW_MAP))
        )
        exploded = parsed.select("*", kind.alias("_kind"), F.posexplode(rows).alias("_pos", "_row"))

        action = F.upper(m["action"])
        row = F.col("_row")
        old = F.try_element_at(m["before"], F.col("_pos") + 1)
        before_raw = (
            F.when(action == "DELETE", F.coalesce(F.when(F.size(old) > 0, old), row))
            .when((action == "UPDATE") & old.isNotNull(), overlay(row, old))
        )
        after_raw = F.when(action.isin("INSERT", "UPDATE"), row)
        types = m["dbValType"]
        tz = self.options["time-zone"]
        commit_ts = F.shiftleft(m["execTs"], PHYSICAL_SHIFT)
        db, schema = blank_to_null(m["db"]), blank_to_null(m["schema"])
        database = F.when(schema.isNull() | db.isNull() | (schema == db), F.coalesce(db, schema)).otherwise(
            F.concat_ws(".", db, schema)
        )
        is_row = F.col("_kind") == ROW
        events = exploded.select(
            *lineage_columns(), "key", "value", "m", "_kind",
            F.col("_pos").cast("int").alias("event_index"),
            F.col("_kind").alias("event_kind"),
            F.when(is_row, action).alias("op"),
            database.alias("database"),
            blank_to_null(m["table"]).alias("table"),
            F.when(~F.col("_kind").eqNullSafe(WATERMARK), commit_ts).alias("commit_ts"),
            tso_time_col(F.when(~F.col("_kind").eqNullSafe(WATERMARK), commit_ts)).alias("commit_time"),
            F.when(~F.col("_kind").eqNullSafe(WATERMARK) & (m["bid"] > 0), m["bid"]).alias("source_position"),
            event_time_from_ms(m["execTs"]).alias("event_time"),
            F.when(is_row, m["pks"]).alias("pk_names"),
            canonical_values(before_raw, types, tz).alias("before"),
            canonical_values(after_raw, types, tz).alias("after"),
            F.when(is_row, types).alias("column_types"),
            F.when(F.col("_kind") == DDL, m["action"]).alias("ddl_type"),
            F.when(F.col("_kind") == DDL, m["sql"]).alias("ddl_sql"),
            F.when(F.col("_kind") == WATERMARK, commit_ts).alias("watermark_ts"),
            has_non_latin1_binary(row, types).alias("_bad_binary"),
        )
        pk_values = F.transform(
            "pk_names",
            lambda n: F.coalesce(F.try_element_at(F.col("after"), n), F.try_element_at(F.col("before"), n)),
        )
        events = events.withColumn("pk_values", pk_values)
        reason, detail = self._reject()
        return events.withColumns({REJECT_REASON: reason, REJECT_DETAIL: detail}).select(*DECODED_COLUMNS)

    @staticmethod
    def _reject() -> tuple[Column, Column]:
        """First failing rule wins: (reason code, human detail)."""
        m = F.col("m")
        kind = F.col("_kind")
        is_row = kind == ROW
        rules: list[tuple[Column, str | None, Column | None]] = [
            (F.col("value").isNull() | (F.length("value") == 0), "empty_message",
             F.lit("the Kafka message has no value")),
            (~F.is_valid_utf8("value"), "invalid_utf8", F.lit("the value is not valid UTF-8")),
            (m.isNull() | m["_corrupt"].isNotNull(), None, None),  # invalid_json / unexpected_shape
            (m["execTs"].isNull(), "missing_commit_ts", F.lit("no execTs")),
            (is_row & ~F.upper(m["action"]).isin(*_DML_ACTIONS), "unknown_event_type",
             F.concat(F.lit("unknown cloudcanal action "), F.coalesce(m["action"], F.lit("null")))),
            (is_row & F.coalesce(F.size(m["data"]) <= 0, F.lit(True)), "missing_row_data",
             F.lit("DML message without data rows")),
            (is_row & (F.col("database").isNull() | F.col("table").isNull()), "missing_table_name",
             F.lit("DML message without db or table")),
            (is_row & F.coalesce(F.size("pk_names") <= 0, F.lit(True)), "missing_primary_key",
             F.lit("DML message with empty pks")),
            (is_row & F.exists("pk_values", lambda v: v.isNull()), "null_primary_key",
             F.concat(F.lit("a primary key column is null or absent: "), F.array_join("pk_names", ","))),
            ((kind == DDL) & blank_to_null(F.trim("ddl_sql")).isNull(), "missing_ddl_sql",
             F.lit("DDL message without sql")),
            (is_row & F.col("_bad_binary"), "invalid_binary_value",
             F.lit("a binary column holds characters beyond ISO-8859-1")),
        ]
        return first_failing_rule(rules)

"""Aliyun DTS Avro (subscribe / CloudCanal "Aliyun DTS Avro"): one schemaless Avro `Record`
per Kafka value, no container header, no Confluent magic byte (ORACLES.md §7).

Avro needs Python: `mapInArrow` decodes each Arrow batch with fastavro against the
cached parsed schema (`dts_avro_schema`); value rendering lives in `dts_avro_records`.
- operation INSERT/UPDATE/DELETE => row event (before/after from beforeImages /
  afterImages, names and type codes from `fields`); DDL => `afterImages` holds the SQL;
  every other operation (HEARTBEAT, BEGIN, COMMIT, CHECKPOINT...) => a watermark event at
  its sourceTimestamp. Only HEARTBEAT can feed the landing watermark (route), and only
  with `heartbeat-as-watermark=true`: row timestamps are binlog statement times, so a
  long transaction committed after a heartbeat carries older times and would turn late.
- objectName `db.table` (`db.schema.table` -> database `db.schema`); primary key from the
  tag `pk_uk_info` ({"PRIMARY": [...]}, as the SDK's AvroRecordParser reads it), else the
  `primary-key` option.
- no TSO: commit_ts = (sourceTimestamp s * 1000) << 18; source_position from
  sourcePosition `end_log_pos@file_number` = file << 32 | pos (binlog order in a second).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.common.tso import PHYSICAL_SHIFT, plausible_ms, tso_time_col
from cdc_assets.contracts.schemas import (
    DDL,
    DECODED_COLUMNS,
    LINEAGE_FIELDS,
    REJECT_DETAIL,
    REJECT_REASON,
    ROW,
    WATERMARK,
)
from cdc_assets.decode.base import Decoder
from cdc_assets.decode.common.arrow_events import DEFAULT_MAX_MESSAGE_BYTES, kept_bytes, oversized
from cdc_assets.decode.common.key_option import KeyOption
from cdc_assets.decode.common.spark_helpers import (
    blank_to_null, event_time_from_ms, lineage_columns, with_marker_routing,
)
from cdc_assets.decode.dts_avro.events import DML_OPERATIONS, HEARTBEAT, Reject, decode_value, read_header
from cdc_assets.decode.dts_avro.schema import parsed_record_schema

_STRINGS = T.ArrayType(T.StringType())
# Fields the Python side adds per message, after the lineage columns and key / value.
_EVENT_FIELDS = [
    T.StructField("operation", T.StringType()),
    T.StructField("database", T.StringType()),
    T.StructField("table", T.StringType()),
    T.StructField("record_id", T.LongType()),
    T.StructField("source_ts", T.LongType()),
    T.StructField("source_position", T.LongType()),
    T.StructField("pk_names", _STRINGS),
    T.StructField("col_names", _STRINGS),
    T.StructField("col_types", _STRINGS),
    T.StructField("code_types", _STRINGS),
    T.StructField("before_vals", _STRINGS),
    T.StructField("after_vals", _STRINGS),
    T.StructField("before_not_logged", _STRINGS),  # before-image columns without a value (EmptyObject.NONE)
    T.StructField("ddl_sql", T.StringType()),
    T.StructField("reject_reason", T.StringType()),
    T.StructField("reject_detail", T.StringType()),
]
_PASS_THROUGH = [*lineage_columns(), "key", "value"]
_DECODED_SCHEMA = T.StructType(
    LINEAGE_FIELDS + [T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType())] + _EVENT_FIELDS
)
_ARROW_TYPES = {T.StringType: pa.string(), T.LongType: pa.int64(), T.ArrayType: pa.list_(pa.string())}


def _decode_batches(batches: Iterator[pa.RecordBatch], key_option: KeyOption,
                    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[pa.RecordBatch]:
    schema = parsed_record_schema()
    names = [f.name for f in _EVENT_FIELDS]
    for batch in batches:
        rows = []
        big = oversized(batch, max_bytes)
        for i, value in enumerate(batch.column("value").to_pylist()):
            if big and i in big:
                rows.append({"reject_reason": big[i].reason, "reject_detail": big[i].detail})
                continue
            try:
                rows.append(decode_value(value, schema, key_option))
            except Reject as r:
                rows.append({"reject_reason": r.reason, "reject_detail": r.detail})
            except Exception as e:  # a shape no rule foresaw: quarantined, never the run
                rows.append({"reject_reason": "decoder_error", "reject_detail": f"{type(e).__name__}: {e}"[:500]})
        arrays = [batch.column(c) for c in _PASS_THROUGH]
        if big:  # a too-large message's bytes: their first KEPT_PREFIX_BYTES
            arrays[-2:] = kept_bytes(arrays[-2:], pa.array([r.get("reject_reason") for r in rows], pa.string()))
        arrays += [pa.array([r.get(f.name) for r in rows], type=_ARROW_TYPES[type(f.dataType)])
                   for f in _EVENT_FIELDS]
        yield pa.RecordBatch.from_arrays(arrays, names=[*_PASS_THROUGH, *names])


def _header_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        headers = [read_header(v) for v in batch.column("value").to_pylist()]
        yield batch.append_column("_source_ts", pa.array([h[0] for h in headers], type=pa.int64())).append_column(
            "_operation", pa.array([h[1] for h in headers], type=pa.string()))


def _source_ms(seconds: str) -> Column:
    """DTS times are whole seconds; garbage (overflowing, implausible) becomes null."""
    return plausible_ms(F.try_multiply(F.col(seconds), F.lit(1000)))


def _to_map(names: Column, values: Column) -> Column:
    return F.when(values.isNotNull(), F.map_from_arrays(names, values))


def _with_column_types(ev: DataFrame) -> DataFrame:
    """`column_types`: a NULL value has no type of its own (VARCHAR and VARBINARY share a
    type code, a NULL Decimal has no scale), so it takes the type the same column's values
    show in the newest other event of this input, else the type code's text default."""
    order = F.struct("source_ts", "source_position", "kafka_partition", "kafka_offset")
    seen = ev.select("database", "table", order.alias("_order"),
                     F.explode(F.arrays_zip("col_names", "col_types")).alias("e")).where(
        F.col("e.col_types").isNotNull())
    learned = seen.groupBy("database", "table", F.col("e.col_names").alias("name")).agg(
        F.max_by("e.col_types", "_order").alias("type")
    ).groupBy("database", "table").agg(F.map_from_entries(F.collect_list(F.struct("name", "type"))).alias("_learned"))
    types = F.transform(
        "col_names",
        lambda n, i: F.coalesce(F.try_element_at("col_types", i + 1), F.try_element_at("_learned", n),
                                F.try_element_at("code_types", i + 1)),
    )
    return ev.join(F.broadcast(learned), on=["database", "table"], how="left").withColumn(
        "_types", F.when(F.col("col_names").isNotNull(), types))


class DtsAvroDecoder(Decoder):
    name = "dts-avro"
    default_options = {
        # Let HEARTBEAT records advance the landing watermark (see module docstring).
        "heartbeat-as-watermark": "false",
    }
    watermark_option = "heartbeat-as-watermark"

    def route(self, raw: DataFrame) -> DataFrame:
        schema = T.StructType(raw.schema.fields + [T.StructField("_source_ts", T.LongType()),
                                                   T.StructField("_operation", T.StringType())])
        headed = raw.mapInArrow(_header_batches, schema)
        use_heartbeats = self.emits_watermarks()
        source_ms = _source_ms("_source_ts")
        heartbeat = F.lit(use_heartbeats) & (F.col("_operation") == HEARTBEAT)
        return with_marker_routing(headed, source_ms, heartbeat).drop("_source_ts", "_operation")

    def python_events(self, batch: pa.RecordBatch) -> list[dict]:
        """Enough of each event for `cdc-assets inspect` (no type learned from other events)."""
        out = []
        for row in next(_decode_batches(iter([batch]), self.key_option, self.max_message_bytes)).to_pylist():
            op, ms = row["operation"], None if row["source_ts"] is None else row["source_ts"] * 1000
            kind = ROW if row["reject_reason"] or op in DML_OPERATIONS else DDL if op == "DDL" else WATERMARK
            ts = None if ms is None else ms << PHYSICAL_SHIFT
            names = row["col_names"] or []
            types = [t or c for t, c in zip(row["col_types"] or [None] * len(names), row["code_types"] or [])]
            out.append({**{c: row[c] for c in _PASS_THROUGH}, "event_kind": kind, "op": op if kind == ROW else None,
                        "database": row["database"], "table": row["table"],
                        "commit_ts": ts if kind != WATERMARK else None, "event_ms": ms,
                        "pk_names": row["pk_names"], "column_types": dict(zip(names, types)) if names else None,
                        "watermark_ts": ts if kind == WATERMARK and op == HEARTBEAT and self.emits_watermarks() else None,
                        REJECT_REASON: row["reject_reason"], REJECT_DETAIL: row["reject_detail"]})
        return out

    def decode(self, raw: DataFrame) -> DataFrame:
        """Avro is read in Python; the events are built in Spark, which learns a NULL
        value's column type from the other events of the input (`_with_column_types`)."""
        batches = functools.partial(_decode_batches, key_option=self.key_option, max_bytes=self.max_message_bytes)
        ev = _with_column_types(raw.select(*_PASS_THROUGH).mapInArrow(batches, _DECODED_SCHEMA))
        op = F.col("operation")
        kind = (
            F.when(F.col("reject_reason").isNotNull() | op.isin(*DML_OPERATIONS), F.lit(ROW))
            .when(op == "DDL", F.lit(DDL))
            .otherwise(F.lit(WATERMARK))
        )
        ts = F.shiftleft(_source_ms("source_ts"), PHYSICAL_SHIFT)
        before = _to_map(F.col("col_names"), F.col("before_vals"))
        not_logged = F.col("before_not_logged")
        before = F.when(not_logged.isNull(), before).otherwise(
            F.map_filter(before, lambda k, _: ~F.array_contains(not_logged, k)))
        after = _to_map(F.col("col_names"), F.col("after_vals"))
        events = ev.select(
            *_PASS_THROUGH, "reject_reason", "reject_detail", "operation", "ddl_sql",
            F.lit(0).alias("event_index"),
            kind.alias("event_kind"),
            F.when(kind == ROW, op).alias("op"),
            "database", "table",
            F.when(kind != WATERMARK, ts).alias("commit_ts"),
            tso_time_col(F.when(kind != WATERMARK, ts)).alias("commit_time"),
            F.when(kind != WATERMARK, F.col("source_position")).alias("source_position"),
            event_time_from_ms(_source_ms("source_ts")).alias("event_time"),
            F.when(kind == ROW, F.col("pk_names")).alias("pk_names"),
            F.when(op.isin("UPDATE", "DELETE"), before).alias("before"),
            F.when(op.isin("INSERT", "UPDATE"), after).alias("after"),
            F.when(kind == ROW, _to_map(F.col("col_names"), F.col("_types"))).alias("column_types"),
            F.when(kind == DDL, op).alias("ddl_type"),
            F.when(kind == WATERMARK, ts).alias("watermark_ts"),
        )
        # a DELETE's key from its before image; a key column set to NULL stays NULL
        image = F.coalesce("after", "before")
        pk_values = F.transform("pk_names", lambda n: F.try_element_at(image, n))
        events = events.withColumn("pk_values", pk_values).withColumn("ddl_sql", F.when(kind == DDL, F.col("ddl_sql")))
        reason, detail = self._reject()
        return events.withColumns({REJECT_REASON: reason, REJECT_DETAIL: detail}).select(*DECODED_COLUMNS)

    @staticmethod
    def _reject() -> tuple[Column, Column]:
        """The Python side's reason first, then the change-log rules; first failing wins."""
        is_row = F.col("event_kind") == ROW
        op = F.col("op")
        rules: list[tuple[Column, str, Column]] = [
            ((F.col("event_kind") != WATERMARK) & F.col("commit_ts").isNull(), "missing_commit_ts",
             F.lit("sourceTimestamp is missing or not a plausible time")),
            ((F.col("event_kind") == WATERMARK) & F.col("watermark_ts").isNull(), "missing_watermark_ts",
             F.lit("heartbeat without a plausible sourceTimestamp")),
            ((F.col("event_kind") == DDL) & blank_to_null(F.trim("ddl_sql")).isNull(), "missing_ddl_sql",
             F.lit("DDL record without its SQL text")),
            (is_row & ((op == "DELETE") & F.col("before").isNull()
                       | op.isin("INSERT", "UPDATE") & F.col("after").isNull()), "missing_row_data",
             F.concat(op, F.lit(" record without its row image"))),
            (is_row & (F.col("database").isNull() | F.col("table").isNull()), "missing_table_name",
             F.lit("objectName is not db.table")),
            (is_row & F.coalesce(F.size("pk_names") <= 0, F.lit(True)), "missing_primary_key",
             F.lit("no PRIMARY in the pk_uk_info tag, and the primary-key option names none for its table")),
            (is_row & F.exists("pk_values", lambda v: v.isNull()), "null_primary_key",
             F.concat(F.lit("a primary key column is null or absent: "), F.array_join("pk_names", ","))),
        ]
        reason: Column = F.col("reject_reason")
        detail: Column = F.col("reject_detail")
        tail_reason: Column = F.lit(None).cast("string")
        tail_detail: Column = F.lit(None).cast("string")
        for cond, code, text in reversed(rules):
            tail_reason = F.when(cond, F.lit(code)).otherwise(tail_reason)
            tail_detail = F.when(cond, text).otherwise(tail_detail)
        return F.coalesce(reason, tail_reason), F.when(reason.isNotNull(), detail).otherwise(tail_detail)

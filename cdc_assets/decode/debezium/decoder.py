"""Debezium JSON envelopes: TiCDC's `debezium` protocol and Debezium's own (`debezium-json`).

Specs: shared/specs/ticdc-debezium.txt, cloudcanal-message-formats.txt ("Debezium
Envelope"), debezium.io MySQL connector. One message = one event; the value is
`{"schema": ..., "payload": ...}`, `{"payload": ...}` (TiCDC `debezium-disable-schema`)
or the bare payload (Kafka Connect `schemas.enable=false`); the shape is detected per
message, so `debezium-disable-schema` / `debezium-output-old-value` are accepted for
sink-URI parity only; `enable-tidb-extension` says whether watermarks will come.
`debezium-json`'s `binary-handling-mode` is the connector's `binary.handling.mode` (how a
binary column written as a string is encoded; see `debezium/field_schemas.py`). The
`time-zone` option is not needed: Debezium carries TIMESTAMP as a UTC instant
(ZonedTimestamp) and DATETIME as the wall clock.

- `op`: c (CloudCanal: i) INSERT, u UPDATE, d DELETE, r READ (snapshot);
  m = TiCDC watermark (checkpoint, `source.commit_ts`); a (CloudCanal ALTER) or no `op`
  with a `ddl` field = DDL. TRUNCATE comes with empty `tableChanges`: the SQL is kept;
  Debezium's own TRUNCATE is `op` t, naming its table in `source` only: the DDL event gets
  `TRUNCATE TABLE` of that table.
- Decoding parses each message once in Python inside `mapInArrow` (`debezium/events.py`),
  with numbers kept as written: a double would re-print 9999999999.99 and lose DECIMAL
  digits, and a Connect Decimal's base64 string must stay apart from a JSON number.
  Values: see `debezium/values.py`. Routing at landing reads a few fields in Spark.
- commit_ts: `source.commit_ts` (TiCDC). `debezium-json` without it derives
  `source.ts_ms << 18` (`payload.ts_ms` when the source time is 0, as in Debezium 1.x
  snapshots) and puts the binlog order (`file` number << 32 | `pos`) in source_position.
- Connectors with schemas (PostgreSQL, SQL Server, Oracle, Db2: `source.schema`): the
  database is `<db>.<schema>`, so two schemas' tables never merge; their schema changes
  are not MySQL's SQL and are quarantined (`unsupported_ddl_dialect`).
- `commit-time=kafka-timestamp` (debezium-json): commit_ts from the Kafka record timestamp,
  source_position = the offset, for producers that write no time (`kafka_time`).
- Primary key: the Kafka key's fields (key schema order, else key payload order);
  without a usable key, the `primary-key` option (`key_option`: every table or per table). DDL
  events report `tableChanges[0].table.primaryKeyColumnNames`; rows do not borrow it
  (that would need state across messages and windows).
- A Kafka tombstone (null value after a delete, for log compaction; its key is null too for
  a table without a key) carries no change: quarantined as `tombstone` so it is counted,
  meaning "expected, nothing to apply".
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.common.tso import MAX_TSO_MS, PHYSICAL_SHIFT
from cdc_assets.decode.base import Decoder
from cdc_assets.decode.common import kafka_time
from cdc_assets.decode.common.spark_helpers import PARSED, with_parsed_value
from cdc_assets.decode.debezium.events import WATERMARK_OP, Options, decode_batches, placeholder_forms
from cdc_assets.decode.debezium.field_schemas import BINARY_STRING_RULES

_ROUTE_SOURCE = "struct<commit_ts:bigint,ts_ms:bigint>"
_ROUTE_SCHEMA = (
    f"struct<payload:struct<op:string,ts_ms:bigint,source:{_ROUTE_SOURCE}>,"
    f"op:string,ts_ms:bigint,source:{_ROUTE_SOURCE}>"
)


def _positive(c: Column) -> Column:
    return F.when(c > 0, c)


class DebeziumDecoder(Decoder):
    """TiCDC's Debezium protocol: commit_ts is `source.commit_ts` (required)."""

    name = "debezium"
    default_options = {
        # TiCDC sends checkpoint (watermark) events only with the extension on.
        "enable-tidb-extension": "true",
        # TiCDC sink-URI options, accepted for parity (the shape is detected per message).
        "debezium-disable-schema": "false",
        "debezium-output-old-value": "true",
    }
    watermark_option = "enable-tidb-extension"
    #: Plain Debezium has no TSO: derive commit_ts from the source time.
    derive_commit_ts = False

    def _commit_ts(self, source: Column, ts_ms: Column) -> Column:
        if not self.derive_commit_ts:
            return source["commit_ts"]
        ms = F.coalesce(_positive(source["ts_ms"]), _positive(ts_ms))
        derived = F.when(ms < MAX_TSO_MS, F.shiftleft(ms, PHYSICAL_SHIFT))
        return F.coalesce(source["commit_ts"], derived)

    def route(self, raw: DataFrame) -> DataFrame:
        m = F.col(PARSED)
        p = m["payload"]
        op = F.coalesce(p["op"], m["op"])
        source = F.struct(
            F.coalesce(p["source"]["commit_ts"], m["source"]["commit_ts"]).alias("commit_ts"),
            F.coalesce(p["source"]["ts_ms"], m["source"]["ts_ms"]).alias("ts_ms"),
        )
        ts_ms = F.coalesce(p["ts_ms"], m["ts_ms"])
        commit_ts = self._commit_ts(source, ts_ms)
        return with_parsed_value(raw, _ROUTE_SCHEMA).withColumns(
            {
                "routing_ms": kafka_time.kafka_ms() if self.kafka_commit_time else F.coalesce(
                    F.shiftright(commit_ts, PHYSICAL_SHIFT),
                    _positive(source["ts_ms"]),
                    _positive(ts_ms),
                    kafka_time.kafka_ms(),
                ),
                "watermark_ts": F.when(op == WATERMARK_OP, source["commit_ts"]),
            }
        ).drop(PARSED)

    def batch_function(self):
        options = Options(derive_commit_ts=self.derive_commit_ts, key_option=self.key_option,
                          binary_mode=self.options.get("binary-handling-mode", "bytes"),
                          apply_snapshot_drops=self.flag("apply-snapshot-drops"),
                          unavailable=placeholder_forms(self.options.get("unavailable-value-placeholder", "")),
                          max_message_bytes=self.max_message_bytes, kafka_commit_time=self.kafka_commit_time)
        return functools.partial(decode_batches, options=options)


class DebeziumJsonDecoder(DebeziumDecoder):
    """Debezium's own connector (and CloudCanal's Debezium Envelope): no TSO, so
    commit_ts = source.ts_ms << 18 and the binlog position orders within a millisecond."""

    name = "debezium-json"
    # The connector's `binary.handling.mode`: how a binary column written as a string (with
    # `column.propagate.source.type`, which says it is binary) is encoded.
    default_options = {
        "binary-handling-mode": "bytes",
        # The snapshot's `DROP TABLE / DATABASE IF EXISTS` (schema-history setup) change no rows
        # unless this is true: with `snapshot.mode=always`, a re-snapshot then also removes rows
        # deleted while the connector was not streaming; with `no_data` / `recovery`, or a
        # blocking snapshot with `additional-conditions`, it empties tables (no rows follow).
        "apply-snapshot-drops": "false",
        # The connector's `unavailable.value.placeholder`: a value the binlog did not log (NOBLOB).
        "unavailable-value-placeholder": "__debezium_unavailable_value",
        # `kafka-timestamp`: producers without event time (Flink CDC's Kafka sink; `kafka_time`)
        kafka_time.OPTION: kafka_time.MESSAGE,
    }
    option_choices = {"binary-handling-mode": tuple(BINARY_STRING_RULES), kafka_time.OPTION: kafka_time.CHOICES}
    watermark_option = None  # Debezium's connector sends no watermarks
    derive_commit_ts = True

"""TiCDC Canal-JSON (with or without the `_tidb` extension), also official-Canal shaped `old`.

Spec: shared/specs/ticdc-canal-json.txt. Rules implemented here:
- `isDdl` true => DDL; else `type == "TIDB_WATERMARK"` => watermark; else a DML row event.
- one message may carry several rows in `data` (official Canal batches them); `old[i]`
  pairs with `data[i]` and may hold only the changed columns, so the before image is
  `data[i]` overlaid with `old[i]`.
- TiCDC writes binary columns as ISO-8859-1 text (byte b -> code point b); we turn them
  back into the exact bytes (canonical base64 in the change log).
- primary key = `pkNames`, else the `primary-key` option (`key_option.py`; RisingWave's
  and some official Canal messages carry `pkNames: null`).
- commit_ts is `_tidb.commitTs`; without the extension (`enable-tidb-extension=false`, as
  official Canal is read) it is derived from `es << 18` (millisecond precision only) and
  official Canal's batch `id` (> 0; TiCDC writes 0) becomes `source_position`, so that a later
  batch wins a tie on `es`. With the extension on (the default) a row or DDL message without
  `_tidb.commitTs` is quarantined (`missing_commit_ts`): `es` is not its commit time, and
  applying it there could reorder it against its neighbours' exact TSOs.
- official Canal (Paimon/Flink corpora): geometry values are MySQL's internal bytes as
  ISO-8859-1 text like binary ones; ENUM / SET arrive as index / bit mask (Canal and TiCDC
  write nothing else), mapped to the names listed in a parameterised `mysqlType`
  (`enum('a','b')`); ENUM index 0 is MySQL's `''` for an invalid value.
- TiCDC's large-message handling (`_tidb.onlyHandleKey`, `_tidb.claimCheckLocation`) sends
  a too-large row's handle key only: usable for a DELETE; an INSERT / UPDATE is quarantined
  (`handle_key_only`, `claim_check_not_supported`), never applied as a key-only row.
- a column value written as a JSON number (Flink's canal-json format) is kept as its exact
  text, never rounded through a double (`json_fields.parse_rows_exactly`); numbers nested
  inside a JSON column's value are written as orjson read them.

`commit-time=kafka-timestamp`: for producers that write no `es` (Flink CDC's Kafka pipeline
sink), the Kafka record timestamp is every event's commit time and its offset the source
position; the landing routes by that timestamp (`kafka_time`).

TiCDC's `large-message-handle-compression` (snappy / lz4 values) is the option of the same
name (`large_messages.py`): values are decompressed for routing and decoding, and the landing
and the quarantine keep them as they came.

Decoding parses each message once with orjson inside `mapInArrow` (`canal_json/events.py`):
Spark's `from_json` into per-message maps was slower on this shape (BENCHMARKS.md). Routing
at landing reads four fields only and stays a Spark expression.
"""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame, functions as F, types as T

from cdc_assets.common.tso import PHYSICAL_SHIFT
from cdc_assets.decode.base import Decoder
from cdc_assets.decode.canal_json.events import decode_batches
from cdc_assets.decode.common import kafka_time
from cdc_assets.decode.common import large_messages
from cdc_assets.decode.common.spark_helpers import PARSED, with_parsed_value

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


_RAW_VALUE = "_cdc_raw_value"


class CanalJsonDecoder(Decoder):
    name = "canal-json"
    default_options = {
        # TiCDC option names. The extension adds `_tidb.commitTs` and TIDB_WATERMARK.
        "enable-tidb-extension": "true",
        "content-compatible": "false",
        "only-output-updated-columns": "false",
        large_messages.OPTION: "none",
        # `kafka-timestamp`: producers without event time (Flink CDC's Kafka sink; `kafka_time`)
        kafka_time.OPTION: kafka_time.MESSAGE,
    }
    option_choices = {large_messages.OPTION: large_messages.CODECS, kafka_time.OPTION: kafka_time.CHOICES}

    def emits_watermarks(self) -> bool:
        return self.flag("enable-tidb-extension") and not self.kafka_commit_time

    def route(self, raw: DataFrame) -> DataFrame:
        codec = self.options[large_messages.OPTION]
        if codec != "none":  # routed by the plain value; the raw bytes are what is landed
            plain = large_messages.decompressed_values(raw.withColumn(_RAW_VALUE, F.col("value")), codec)
            return self._route(plain).withColumn("value", F.col(_RAW_VALUE)).drop(_RAW_VALUE)
        return self._route(raw)

    def _route(self, raw: DataFrame) -> DataFrame:
        m = F.col(PARSED)
        tidb = m["_tidb"]
        is_watermark = F.coalesce(~m["isDdl"], F.lit(True)) & (m["type"] == "TIDB_WATERMARK")
        return with_parsed_value(raw, _ROUTING_SCHEMA).withColumns(
            {
                "routing_ms": kafka_time.kafka_ms() if self.kafka_commit_time else F.coalesce(
                    F.shiftright(tidb["commitTs"], PHYSICAL_SHIFT),
                    F.shiftright(tidb["watermarkTs"], PHYSICAL_SHIFT),
                    m["es"],
                    kafka_time.kafka_ms(),
                ),
                # Kafka-timestamp commit times: a TiDB watermark is on another clock, so none is used
                "watermark_ts": F.when(is_watermark & F.lit(not self.kafka_commit_time), tidb["watermarkTs"]),
            }
        ).drop(PARSED)

    def batch_function(self):
        return functools.partial(decode_batches, time_zone=self.options["time-zone"], key_option=self.key_option,
                                 codec=self.options[large_messages.OPTION], max_bytes=self.max_message_bytes,
                                 kafka_commit_time=self.kafka_commit_time,
                                 tidb_extension=self.flag("enable-tidb-extension"))

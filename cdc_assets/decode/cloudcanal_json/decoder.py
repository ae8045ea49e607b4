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
- no TSO: commit_ts = `execTs << 18` (source SQL execution time, ms) when 0 < `execTs` < 2^45,
  else `missing_commit_ts`; the batch id `bid` (> 0) orders ties like official Canal's `id`.
- database = `db`, or `db.schema` when the source has schemas (PostgreSQL...).
- primary key = `pks`, else the `primary-key` option (`key_option.py`).
- TRANSACTIONEND markers are decoded as watermark events at `execTs`; they only feed the
  landing watermark (route) with `transaction-end-as-watermark=true`, because a long
  transaction's rows carry older `execTs` than an earlier commit and would turn "late".
- a field of the wrong JSON type (say `data` not a list of objects) quarantines the message
  (`unexpected_shape`); a DML message whose `action` is missing is `unknown_event_type`.
- value rules are official Canal's (`common/canal_values.py`). A TIMESTAMP in a `time-zone` other
  than UTC is moved to UTC keeping its fraction digits as written; a zero date or a form
  other than `yyyy-MM-dd HH:mm:ss[.f]` is left for the snapshot's cast; a wall clock that
  does not exist quarantines the message (`invalid_timestamp_value`).

Decoding parses each message once with orjson inside `mapInArrow`
(`cloudcanal_json/events.py`), like Canal-JSON; routing at landing reads two fields only and
stays a Spark expression.
"""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame, functions as F, types as T

from cdc_assets.common.tso import MAX_TSO_MS
from cdc_assets.decode.base import Decoder
from cdc_assets.decode.cloudcanal_json.events import decode_batches
from cdc_assets.decode.common.spark_helpers import PARSED, with_marker_routing, with_parsed_value

_ROUTING_SCHEMA = T.StructType(
    [T.StructField("entryType", T.StringType()), T.StructField("execTs", T.LongType())]
)
_TRANSACTION_END = "TRANSACTIONEND"


class CloudCanalJsonDecoder(Decoder):
    name = "cloudcanal-json"
    default_options = {
        # Let TRANSACTIONEND markers advance the landing watermark (see module docstring).
        "transaction-end-as-watermark": "false",
    }
    watermark_option = "transaction-end-as-watermark"

    def route(self, raw: DataFrame) -> DataFrame:
        m = F.col(PARSED)
        use_markers = self.emits_watermarks()
        is_marker = F.upper(m["entryType"]) == _TRANSACTION_END
        shiftable = (m["execTs"] > 0) & (m["execTs"] < MAX_TSO_MS)  # as `ms_to_commit_ts` in decode
        return with_marker_routing(with_parsed_value(raw, _ROUTING_SCHEMA), m["execTs"],
                                   F.lit(use_markers) & is_marker & shiftable).drop(PARSED)

    def batch_function(self):
        return functools.partial(decode_batches, time_zone=self.options["time-zone"], key_option=self.key_option,
                                 max_bytes=self.max_message_bytes)

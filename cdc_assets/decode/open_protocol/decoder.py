"""TiCDC Open Protocol: binary-framed batches of key/value JSON events.

Spec: shared/specs/ticdc-open-protocol.txt (oracles: conformance ORACLES.md §2). Rules:
- key = 8-byte big-endian version (must be 1), then [8-byte BE length][key JSON]...;
  value = [8-byte BE length][value JSON]...; the i-th key pairs with the i-th value.
  Key JSON: `ts`, `scm`, `tbl`, `t` (1 row, 2 DDL, 3 resolved), optional `rid`/`ptn`.
- a resolved event's value is a zero-length frame (or no value at all): a watermark.
- row value: `u` (after image), `p` (old image; with `u` => UPDATE), `d` (DELETE; only
  the handle-key columns when old values are off). A column is
  `{"t": type code, "h": handle?, "f": flag bits, "v": value}`; primary key = columns
  with `h` or the handle-key / primary-key flag bits, else the `primary-key` option.
- values: type codes 249-252 (the blob family) are base64 of the bytes (text blobs:
  UTF-8 text); char/varchar with the binary flag are Go-quoted (strconv.Quote without
  the quotes); unsigned bigint is a bare JSON number (Python's json keeps it exact).
  Numbers keep their JSON text (floats are not re-rounded).
- TiCDC's large-message handling (`large_messages.py`): an event sent as its handle key
  only (`ohk`, claim-check `ccl`) is applied if it is a DELETE; with
  `large-message-handle-compression` each event's value frame is a snappy block or an lz4
  frame (keys are never compressed).
- a framing error (`missing_key`, `bad_version`, `truncated_frame`, `unpaired_key_value`)
  quarantines the whole message as one reject (event 0) and applies none of its events:
  after a broken length or pairing, no frame can be trusted to be the event it looks like.
  A bad event in a good frame (invalid JSON, unknown type code) costs only that event.

Framing needs Python, so `decode`/`route` run it per Arrow batch with `mapInArrow`: framing in
`frames.py`, values in `values.py`, events in `events.py`. No separate event time; no
source position (commit_ts is already a total order).
"""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame, functions as F, types as T

from cdc_assets.common.tso import PHYSICAL_SHIFT
from cdc_assets.decode.base import EVENT_ROUTING_MS, Decoder
from cdc_assets.decode.common import kafka_time, large_messages
from cdc_assets.decode.open_protocol.events import decode_batches
from cdc_assets.decode.open_protocol.frames import route_batches


class OpenProtocolDecoder(Decoder):
    name = "open-protocol"
    default_options = {
        # TiCDC changefeed settings, accepted so a changefeed config can be passed as is.
        # The decoder reads both from the message shape (`p` present; `p` overlaid on `u`).
        "enable-old-value": "true",
        "only-output-updated-columns": "false",
        # Routing reads the keys alone, which are never compressed.
        large_messages.OPTION: "none",
    }
    option_choices = {large_messages.OPTION: large_messages.CODECS}

    def emits_watermarks(self) -> bool:
        return True  # resolved events

    def route(self, raw: DataFrame) -> DataFrame:
        schema = T.StructType(
            [*raw.schema.fields, T.StructField("_max_ts", T.LongType()), T.StructField("watermark_ts", T.LongType()),
             T.StructField(EVENT_ROUTING_MS, T.ArrayType(T.LongType()))]
        )
        routed = raw.mapInArrow(route_batches, schema)
        routing_ms = F.coalesce(F.shiftright("_max_ts", PHYSICAL_SHIFT), kafka_time.kafka_ms())
        return routed.withColumn("routing_ms", routing_ms).select(
            *raw.columns, "routing_ms", "watermark_ts", EVENT_ROUTING_MS)

    def batch_function(self):
        return functools.partial(decode_batches, time_zone=self.options["time-zone"], key_option=self.key_option,
                                 codec=self.options[large_messages.OPTION], max_bytes=self.max_message_bytes)

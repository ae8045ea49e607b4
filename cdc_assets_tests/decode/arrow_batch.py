"""Run a Python decoder's batch function without Spark: messages in, event dicts out."""

from __future__ import annotations

import json

import pyarrow as pa

from cdc_assets.decode.common.arrow_events import PASSED


def decode_values(decode_batches, *values, time_zone: str = "UTC", keys: list[bytes] | None = None) -> list[dict]:
    """`values`: JSON-able objects, raw bytes or None (an empty message), one Arrow batch."""
    raw = [v if v is None or isinstance(v, bytes) else json.dumps(v).encode() for v in values]
    n = len(raw)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
         pa.array([None] * n, pa.timestamp("us", "UTC")), pa.array(keys or [None] * n, pa.binary()),
         pa.array(raw, pa.binary())],
        names=PASSED,
    )
    return [e for b in decode_batches(iter([batch]), time_zone) for e in b.to_pylist()]

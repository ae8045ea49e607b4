"""TiCDC's large-message handling (Kafka sink settings), for Canal-JSON and Open Protocol.

`large-message-handle-option`: a row too large for Kafka is sent as its handle-key columns
only, with the row kept in external storage (claim-check) or nowhere (handle-key-only).
The key is all a DELETE needs; an INSERT or UPDATE would replace the row with its key
columns alone, so it is quarantined (fetching the row back is not done).

`large-message-handle-compression`: every Canal-JSON message value, and every Open Protocol
event value inside its batch, is compressed with snappy (a raw block: Go's `snappy.Encode`)
or lz4 (a frame: Go's `lz4.NewWriter`). A value that does not decompress is taken as
written: compression may have been switched on in the middle of a topic, and a value that is
neither stays for its decoder to quarantine.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from cdc_assets.decode.common.arrow_events import Reject

OPTION = "large-message-handle-compression"
CODECS = ("none", "snappy", "lz4")


def key_only_reject(is_delete: bool, claim_check_location: str | None, only_handle_key: bool | None) -> Reject | None:
    """Why an event sent as its handle key only cannot be applied (None: it can, or it is whole)."""
    if is_delete:
        return None
    if claim_check_location:
        return Reject("claim_check_not_supported", f"row stored externally at {claim_check_location!r}")
    if only_handle_key:
        return Reject("handle_key_only", "large-message handle-key-only event: the row is not in the message")
    return None


def _snappy_length(data: bytes) -> int | None:
    """A snappy block starts with its uncompressed length as a little-endian base-128 varint.
    None when that is no length a block of this size can hold (snappy's best ratio is under
    32:1), so a value that is no snappy block never makes us allocate its garbage length."""
    length = shift = 0
    for byte in data[:5]:
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return length if length <= 32 * len(data) else None
        shift += 7
    return None


def decompress(data: bytes, codec: str) -> bytes:
    """`data` decompressed with `codec`, or `data` itself when it is not valid for `codec`."""
    if codec == "none" or not data:
        return data
    try:
        if codec == "snappy":
            length = _snappy_length(data)
            if length is None:
                return data
            return pa.decompress(data, decompressed_size=length, codec="snappy", asbytes=True)
        return pa.CompressedInputStream(pa.BufferReader(data), "lz4").read()
    except (OSError, pa.ArrowException):  # not such a block / frame
        return data


def _decompressed_batches(batches: Iterator[pa.RecordBatch], codec: str) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        i = batch.schema.get_field_index("value")
        values = [v if v is None else decompress(v, codec) for v in batch.column(i).to_pylist()]
        yield batch.set_column(i, "value", pa.array(values, pa.binary()))


def decompressed_values(raw: DataFrame, codec: str) -> DataFrame:
    """`raw` with each message's whole value decompressed (Canal-JSON's one value per message)."""
    if codec == "none":
        return raw
    return raw.mapInArrow(functools.partial(_decompressed_batches, codec=codec), raw.schema)

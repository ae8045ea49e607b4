"""Open Protocol's binary framing: a message's key and value are batches of length-prefixed
frames (spec: shared/specs/ticdc-open-protocol.txt).

- key = 8-byte big-endian version (must be 1), then [8-byte BE length][key JSON]...;
  value = [8-byte BE length][value JSON]...; the i-th key pairs with the i-th value.
- a framing error (`missing_key`, `bad_version`, `truncated_frame`, `unpaired_key_value`)
  is the whole message's: after a broken length or pairing, no frame can be trusted to be
  the event it looks like.

Routing at landing reads the key frames alone (`message_timestamps`, `route_batches`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa

from cdc_assets.common.tso import PHYSICAL_SHIFT, is_plausible_ms
from cdc_assets.decode.base import EVENT_ROUTING_MS
from cdc_assets.decode.common.arrow_events import Reject

VERSION = 1
_LEN = 8
MAX_TSO = 1 << 63  # a TSO is a signed 64-bit column downstream


def split_frames(buf: bytes, start: int = 0) -> tuple[list[bytes], Reject | None]:
    """[8-byte BE length][payload]... -> payloads, plus the error where framing broke."""
    frames, pos, end = [], start, len(buf)
    while pos < end:
        if end - pos < _LEN:
            return frames, Reject("truncated_frame", f"{end - pos} stray byte(s) where a length was expected")
        length = int.from_bytes(buf[pos:pos + _LEN], "big", signed=True)
        pos += _LEN
        if length < 0 or length > end - pos:
            return frames, Reject("truncated_frame", f"frame length {length} but {end - pos} byte(s) left")
        frames.append(buf[pos:pos + length])
        pos += length
    return frames, None


def key_frames(key: bytes | None) -> tuple[list[bytes], Reject | None]:
    if not key:
        return [], Reject("missing_key", "Open Protocol messages need the Kafka key")
    if len(key) < _LEN:
        return [], Reject("truncated_frame", f"key of {len(key)} byte(s) has no 8-byte version")
    version = int.from_bytes(key[:_LEN], "big", signed=True)
    if version != VERSION:
        return [], Reject("bad_version", f"protocol version {version}, expected {VERSION}")
    return split_frames(key, _LEN)


def framed(key: bytes | None, value: bytes | None) -> tuple[list[bytes], list[bytes], Reject | None]:
    """(key frames, value frames, the framing error of the message or None). Without a value
    the keys stand alone (resolved events); `decode_message` pairs them."""
    keys, err = key_frames(key)
    if err is not None:
        return [], [], _whole(err, f"after {len(keys)} key frame(s)" if keys else None)
    values, err = split_frames(value or b"")
    if err is not None:
        return [], [], _whole(err, f"after {len(values)} value frame(s)" if values else None)
    if value and len(keys) != len(values):
        return [], [], Reject("unpaired_key_value", f"{len(keys)} event key(s) but {len(values)} value(s): "
                                                    "the whole message is quarantined")
    return keys, values, None


def _whole(err: Reject, where: str | None) -> Reject:
    return Reject(err.reason, err.detail + (f" ({where})" if where else "")
                  + ("" if err.reason == "missing_key" else ": the whole message is quarantined"))


def message_timestamps(key: bytes | None) -> tuple[int | None, int | None, list[int]]:
    """(newest plausible ts, max resolved ts, the physical ms of every row / DDL event with a
    plausible ts) of a message, from its key alone (cheap routing). TiCDC batches events of
    one partition into one message, and a batch may hold commits on both sides of a window
    end: the landing places the message in the window of every event it holds."""
    frames, _ = key_frames(key)
    best = resolved = None
    event_ms: list[int] = []
    for frame in frames:
        try:
            k = json.loads(frame)
        except (ValueError, RecursionError):
            continue
        ts = k.get("ts") if isinstance(k, dict) else None
        if type(ts) is not int or not 0 <= ts < MAX_TSO or not is_plausible_ms(ts >> PHYSICAL_SHIFT):
            continue
        best = ts if best is None else max(best, ts)
        if k.get("t") == 3:
            resolved = ts if resolved is None else max(resolved, ts)
        else:
            event_ms.append(ts >> PHYSICAL_SHIFT)
    return best, resolved, event_ms


def route_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        stamps = [message_timestamps(k) for k in batch.column("key").to_pylist()]
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array([s[0] for s in stamps], pa.int64()), pa.array([s[1] for s in stamps], pa.int64()),
             # the events' times, when the message has several times (a batch, or an event
             # beside a resolved frame): the landing lands it in each of their windows
             pa.array([s[2] if len(s[2]) > 1 or (s[2] and s[1] is not None) else None for s in stamps],
                      pa.list_(pa.int64()))],
            names=[*batch.schema.names, "_max_ts", "watermark_ts", EVENT_ROUTING_MS],
        )

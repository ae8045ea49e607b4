"""Parsing a JSON message and reading its fields, for the decoders that parse in Python
(Canal-JSON, CloudCanal): the reject reasons of an unusable value, and the shape checks
that quarantine a field of the wrong JSON type (as Spark's `from_json` with a schema did)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from datetime import tzinfo

import orjson
import pyarrow as pa

from cdc_assets.decode.common.arrow_events import DEFAULT_MAX_MESSAGE_BYTES, Reject, as_text, decode_each_value
from cdc_assets.decode.common.large_messages import decompress

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SHAPE = "valid JSON, but a field has an unexpected type for this protocol"


def parse_object(value: bytes | None) -> dict:
    """A message's JSON object, or the reject that says why there is none."""
    if not value:
        raise Reject("empty_message", "the Kafka message has no value")
    try:
        m = orjson.loads(value)  # orjson also rejects invalid UTF-8: tell the two apart below
    except orjson.JSONDecodeError:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject("invalid_utf8", "the value is not valid UTF-8") from None
        raise Reject("invalid_json", "the value is not valid JSON") from None
    if type(m) is not dict:
        raise Reject("unexpected_shape", SHAPE)
    return m


def parse_rows_exactly(value: bytes | None, fields: tuple[str, ...]) -> dict:
    """`parse_object`, where a column value of the row objects listed in `fields` written as a
    JSON number with a fraction or beyond 64 bits keeps its exact text: orjson reads both as a
    double, which rounds (a DECIMAL(38,20), a DECIMAL(65) integer). Such a message is parsed
    again with numbers as text and only those values are taken from it; values nested deeper
    stay as orjson read them. The specs write values as strings, but some producers (Flink's
    canal-json format) write numbers: the decoders call this only for a message whose events
    came out holding a double (`arrow_events.EventRows`)."""
    m = parse_object(value)
    exact = None
    for field in fields:
        rows = m.get(field)
        for i, row in enumerate(rows if type(rows) is list else ()):
            if type(row) is dict and float in map(type, row.values()):
                if exact is None:  # orjson accepted the text: no NaN / Infinity, no lone surrogate
                    exact = _numbers_as_text(value)
                for k, v in row.items():
                    if type(v) is float:
                        row[k] = str(exact[field][i][k])  # a fraction's text, or a big integer
    return m


def _numbers_as_text(value: bytes):
    try:
        return json.loads(value, parse_float=str)
    except RecursionError:  # the standard parser stops at Python's recursion limit; orjson went deeper
        raise Reject("invalid_json", "the value's JSON nests too deeply to read its numbers exactly") from None


def long_field(v) -> int | None:
    if v is None or (type(v) is int and INT64_MIN <= v <= INT64_MAX):
        return v
    raise Reject("unexpected_shape", SHAPE)


def positive_long_field(v) -> int | None:
    """A long that only counts when positive (a TSO or a time): 0 or less is none at all."""
    v = long_field(v)
    return v if v is not None and v > 0 else None


def bool_field(v) -> bool | None:
    if v is None or type(v) is bool:
        return v
    raise Reject("unexpected_shape", SHAPE)


def object_field(v) -> dict | None:
    if v is None or type(v) is dict:
        return v
    raise Reject("unexpected_shape", SHAPE)


def texts_field(v) -> list | None:
    """A list of texts (primary key names): any other JSON element is read as its text."""
    if v is None:
        return v
    if type(v) is not list:
        raise Reject("unexpected_shape", SHAPE)
    return [x if type(x) is str else as_text(x) for x in v]


def objects_field(v) -> list | None:
    """A list of objects (or nulls)."""
    if v is None:
        return v
    if type(v) is list:
        for x in v:
            if x is not None and type(x) is not dict:
                break
        else:
            return v
    raise Reject("unexpected_shape", SHAPE)


def decode_each_object(batches: Iterator[pa.RecordBatch], time_zone: str,
                       events: Callable[[dict, tzinfo, object], list[tuple]], row_fields: tuple[str, ...],
                       context: object, codec: str = "none",
                       max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[pa.RecordBatch]:
    """`decode_each_value` for protocols whose message is one JSON object: `events(m, tz,
    context)` gives its events; a message holding a double is read again with the numbers of
    `row_fields` kept exact (`parse_rows_exactly`). `codec`: the values' compression; `max_bytes`:
    the `max-message-bytes` option."""
    def events_of(value: bytes | None, tz: tzinfo) -> list[tuple]:
        return events(parse_object(value), tz, context)  # a closure: one call per message

    def exact_events_of(value: bytes | None, tz: tzinfo) -> list[tuple]:
        return events(parse_rows_exactly(value, row_fields), tz, context)

    unpack = None if codec == "none" else functools.partial(decompress, codec=codec)
    return decode_each_value(batches, time_zone, events_of, exact_events_of, unpack, max_bytes)

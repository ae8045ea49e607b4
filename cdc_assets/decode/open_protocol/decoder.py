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

Framing needs Python, so `decode`/`route` run it per Arrow batch with `mapInArrow`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Iterator
from datetime import tzinfo

import pyarrow as pa
from pyspark.sql import DataFrame, functions as F, types as T

from cdc_assets.contracts.schemas import (
    DDL,
    DELETE,
    INSERT,
    REJECT_DETAIL,
    REJECT_REASON,
    ROW,
    UPDATE,
    WATERMARK,
)
from cdc_assets.decode.common.arrow_events import (
    DEFAULT_MAX_MESSAGE_BYTES,
    PARSED_SCHEMA,
    PASSED,
    EventRows,
    Reject,
    decoded_columns,
    gc_paused,
    name_text,
    oversized,
    timestamp_to_utc,
    zone,
)
from cdc_assets.decode.common import large_messages
from cdc_assets.decode.base import EVENT_ROUTING_MS, Decoder
from cdc_assets.decode.common.key_option import NO_KEYS, KeyOption
from cdc_assets.common.tidb_ddl_actions import ddl_action_name
from cdc_assets.common.tso import PHYSICAL_SHIFT, is_plausible_ms


VERSION = 1
_LEN = 8
EVENT_KINDS = {1: ROW, 2: DDL, 3: WATERMARK}
MAX_TSO = 1 << 63  # a TSO is a signed 64-bit column downstream

BINARY_FLAG, HANDLE_KEY_FLAG, PRIMARY_KEY_FLAG, UNSIGNED_FLAG = 0x01, 0x02, 0x08, 0x80
_KEY_FLAGS = HANDLE_KEY_FLAG | PRIMARY_KEY_FLAG
# Type code -> (MySQL type, MySQL type with the binary flag). Docs "Column type code".
COLUMN_TYPES = {
    1: ("tinyint", "tinyint"), 2: ("smallint", "smallint"), 3: ("int", "int"),
    4: ("float", "float"), 5: ("double", "double"), 6: ("null", "null"),
    7: ("timestamp", "timestamp"), 8: ("bigint", "bigint"), 9: ("mediumint", "mediumint"),
    10: ("date", "date"), 11: ("time", "time"), 12: ("datetime", "datetime"), 13: ("year", "year"),
    14: ("date", "date"), 15: ("varchar", "varbinary"), 16: ("bit", "bit"),
    225: ("vector", "vector"),  # TiDB's VECTOR (TypeTiDBVectorFloat32), its text `[1,2,3]`
    245: ("json", "json"), 246: ("decimal", "decimal"), 247: ("enum", "enum"), 248: ("set", "set"),
    249: ("tinytext", "tinyblob"), 250: ("mediumtext", "mediumblob"),
    251: ("longtext", "longblob"), 252: ("text", "blob"),
    253: ("varchar", "varbinary"), 254: ("char", "binary"), 255: ("geometry", "geometry"),
}
_SIGNED_CODES = {1, 2, 3, 4, 5, 8, 9, 246}  # "unsigned" is meaningful for these only
_BLOB_CODES = {249, 250, 251, 252}  # value = base64 of the bytes, text or binary
_CHAR_CODES = {15, 253, 254}  # value = UTF-8 text; Go-quoted bytes with the binary flag
_TIMESTAMP_CODE = 7


# -- framing ----------------------------------------------------------------------------
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


# -- JSON and values --------------------------------------------------------------------
def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


class _NegativeZero(int):
    """Go writes a float -0.0 as `-0`: an int to json, but the FLOAT column's value is -0.0."""

    def __str__(self) -> str:
        return "-0"


def _parse_int(text: str) -> int:
    return _NegativeZero(0) if text == "-0" else int(text)


def parse_json(raw: bytes, what: str) -> dict:
    """Floats keep their text (parse_float=str); ints stay exact Python ints (`-0` too)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Reject("invalid_utf8", f"the {what} JSON is not valid UTF-8") from None
    try:
        obj = json.loads(text, parse_float=str, parse_int=_parse_int, parse_constant=_no_constants)
    except ValueError as e:
        raise Reject("invalid_json", f"the {what} is not valid JSON: {e}") from None
    except RecursionError:
        raise Reject("invalid_json", f"the {what} JSON nests too deeply") from None
    if not isinstance(obj, dict):
        raise Reject("unexpected_shape", f"the {what} JSON is not an object")
    return obj


_GO_ESCAPE_RE = re.compile(rb'\\(x[0-9a-fA-F]{2}|[0-7]{3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[abfnrtv\\"]|.?)', re.S)
_GO_SIMPLE = {b"a": b"\x07", b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t",
              b"v": b"\x0b", b"\\": b"\\", b'"': b'"'}


def _go_escape(m: re.Match) -> bytes:
    e = m.group(1)
    if e in _GO_SIMPLE:
        return _GO_SIMPLE[e]
    head, size = e[:1], len(e)
    if head == b"x" and size == 3:
        return bytes([int(e[1:], 16)])
    if (head, size) in ((b"u", 5), (b"U", 9)):
        cp = int(e[1:], 16)
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            raise ValueError(f"invalid code point \\{e.decode()}")
        return chr(cp).encode("utf-8")
    if size == 3 and e.isdigit() and int(e, 8) <= 0xFF:
        return bytes([int(e, 8)])
    raise ValueError(f"invalid escape \\{e.decode('utf-8', 'replace')}")


def go_unquote(text: str) -> bytes:
    """Inverse of Go's strconv.Quote without the surrounding quotes: the exact bytes."""
    raw = text.encode("utf-8")
    if b'"' in raw.replace(b'\\\\', b"").replace(b'\\"', b"") or b"\n" in raw:
        raise ValueError("unescaped quote or newline")
    return _GO_ESCAPE_RE.sub(_go_escape, raw)


def _scalar_text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, str)):
        return str(v)
    raise TypeError


def column_value(name: str, code: int, binary: bool, v, tz: tzinfo) -> str | None:
    """One column value -> canonical change-log text."""
    if v is None:
        return None
    if code in _BLOB_CODES or (binary and code in _CHAR_CODES):
        if not isinstance(v, str):
            raise Reject("unexpected_shape", f"column {name}: binary value is not a JSON string")
        try:
            data = (base64.b64decode(v, validate=True) if code in _BLOB_CODES else go_unquote(v))
        except (binascii.Error, ValueError) as e:
            raise Reject("invalid_binary_value", f"column {name} (type {code}): {e}") from None
        if binary:
            return base64.b64encode(data).decode("ascii")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject("invalid_text_value", f"column {name} (type {code}): text is not UTF-8") from None
    try:
        text = _scalar_text(v)
    except TypeError:
        raise Reject("unexpected_shape", f"column {name}: value is a JSON {type(v).__name__}") from None
    return timestamp_to_utc(text, tz) if code == _TIMESTAMP_CODE else text


def column_type(code: int, flag: int) -> str:
    plain, with_binary = COLUMN_TYPES[code]
    name = with_binary if flag & BINARY_FLAG else plain
    return f"{name} unsigned" if flag & UNSIGNED_FLAG and code in _SIGNED_CODES else name


def decode_image(image, tz: tzinfo) -> tuple[dict, dict, list[str]]:
    """{name: column} -> (values, MySQL types, primary-key names in column order)."""
    if not isinstance(image, dict):
        raise Reject("unexpected_shape", "a row image is not a JSON object")
    values, types, keys = {}, {}, []
    for name, col in image.items():
        if not isinstance(col, dict):
            raise Reject("unexpected_shape", f"column {name} is not a JSON object")
        code, flag = col.get("t"), col.get("f", 0)
        if flag is None:
            flag = 0
        if type(flag) is not int:
            raise Reject("unexpected_shape", f"column {name}: flag {flag!r} is not an integer")
        if type(code) is not int or code not in COLUMN_TYPES:
            raise Reject("unknown_column_type", f"column {name}: type code {code!r}")
        values[name] = column_value(name, code, bool(flag & BINARY_FLAG), col.get("v"), tz)
        types[name] = column_type(code, flag)
        if col.get("h") is True or flag & _KEY_FLAGS:
            keys.append(name)
    return values, types, keys


# -- events -----------------------------------------------------------------------------
def _rejected(index: int, err: Reject, kind: str = ROW) -> dict:
    return {"event_index": index, "event_kind": kind, REJECT_REASON: err.reason, REJECT_DETAIL: err.detail}


def decode_event(index: int, key: bytes, value: bytes | None, tz: tzinfo, key_option: KeyOption) -> dict:
    """One key frame + its value frame (None: the message had no value) -> an event dict.

    Fields are filled as they are decoded, so a rejected event keeps its table and ts.
    """
    ev = {"event_index": index, "event_kind": ROW}
    try:
        k = parse_json(key, "event key")
        t = k.get("t")
        kind = EVENT_KINDS.get(t) if type(t) is int else None
        if kind is None:
            raise Reject("unknown_event_type", f"event key type {t!r}")
        ev["event_kind"] = kind
        ts = k.get("ts")
        if type(ts) is not int or not 0 <= ts < MAX_TSO:
            missing = "missing_watermark_ts" if kind == WATERMARK else "missing_commit_ts"
            raise Reject(missing, f"event key ts {ts!r}")
        if kind == WATERMARK:
            ev["watermark_ts"] = ts
            return ev
        database, table = name_text(k.get("scm"), "scm"), name_text(k.get("tbl"), "tbl")
        ev.update(database=database, table=table, commit_ts=ts)
        if value is None:
            raise Reject("unpaired_key_value", "a row/DDL event key without a value")
        if kind == DDL:
            _fill_ddl(ev, value)
        else:
            _fill_row(ev, k, value, tz, key_option)
    except Reject as err:
        ev.update({REJECT_REASON: err.reason, REJECT_DETAIL: err.detail})
    except Exception as e:  # a shape no rule foresaw: this event is quarantined, never the run
        ev.update({REJECT_REASON: "decoder_error", REJECT_DETAIL: f"{type(e).__name__}: {e}"[:500]})
    return ev


def _fill_ddl(ev: dict, value: bytes) -> None:
    if not value:
        raise Reject("missing_ddl_query", "DDL event with an empty value")
    v = parse_json(value, "DDL value")
    code = v.get("t")
    ev["ddl_type"] = ddl_action_name(code)
    if not isinstance(v.get("q"), str):
        raise Reject("missing_ddl_query", "DDL value without a `q` string")
    ev["ddl_sql"] = v["q"]


def _fill_row(ev: dict, k: dict, value: bytes, tz: tzinfo, key_option: KeyOption) -> None:
    if k.get("ccl") and not value:  # old TiCDC: no row image at all
        raise large_messages.key_only_reject(False, k["ccl"], None)
    if not value:
        raise Reject("missing_row_data", "row event with an empty value")
    v = parse_json(value, "row value")
    u, p, d = v.get("u"), v.get("p"), v.get("d")
    if u is not None and d is not None:
        raise Reject("unexpected_shape", "row value has both `u` and `d`")
    if u is None and d is None:
        raise Reject("missing_row_data", "row value has neither `u` nor `d`")
    if u is not None:
        ev["op"] = UPDATE if p is not None else INSERT
        after, types, pk_names = decode_image(u, tz)
        ev.update(after=after, column_types=types)
        if p is not None:
            # `p` may hold only the changed columns (only-output-updated-columns).
            old, old_types, _ = decode_image(_without_unwrapped_columns(p), tz)
            ev.update(before={**after, **old}, column_types={**old_types, **types})
    else:
        ev["op"] = DELETE
        before, types, pk_names = decode_image(d, tz)
        ev.update(before=before, column_types=types)
    key_only = large_messages.key_only_reject(ev["op"] == DELETE, k.get("ccl"), k.get("ohk"))
    if key_only is not None:
        raise key_only
    if ev["database"] is None or ev["table"] is None:
        raise Reject("missing_table_name", "row event key without scm or tbl")
    pk_names = pk_names or key_option.names_for(ev["database"], ev["table"])
    ev["pk_names"] = pk_names
    if not pk_names:
        raise Reject("missing_primary_key",
                     "no column has the handle-key or primary-key flag, and "
                     "the primary-key option names none for its table")
    image = ev["after"] if ev.get("after") is not None else ev["before"]
    ev["pk_values"] = [image.get(n) for n in pk_names]
    if any(x is None for x in ev["pk_values"]):
        raise Reject("null_primary_key", "a primary key column is null: " + ",".join(pk_names))


def _without_unwrapped_columns(p):
    """`p` without the bare `t` / `f` / `v` members pingcap/ticdc writes (since 2025, with
    only-output-updated-columns) for a column set from a value to NULL: the column's fields
    without its name. The UPDATE is complete without them (`u` holds every column); only
    that column's old value is lost, and the before image shows it as in `u` (docs/protocols.md)."""
    if isinstance(p, dict) and any(n in _BARE_COLUMN_FIELDS and not isinstance(c, dict) for n, c in p.items()):
        return {n: c for n, c in p.items() if not (n in _BARE_COLUMN_FIELDS and not isinstance(c, dict))}
    return p


_BARE_COLUMN_FIELDS = frozenset({"t", "f", "v"})


def decode_message(key: bytes | None, value: bytes | None, tz: tzinfo, key_option: KeyOption = NO_KEYS,
                   codec: str = "none") -> list[dict]:
    """All events of one Kafka message. A framing error quarantines the whole message as one
    reject (event 0): once a length or a pairing is wrong, no frame of it can be trusted to
    be the event it looks like. `codec`: TiCDC's `large-message-handle-compression` of each
    event's value frame."""
    keys, values, err = _framed(key, value)
    if err is not None:
        return [_rejected(0, err)]
    if codec != "none":
        values = [large_messages.decompress(v, codec) for v in values]
    if not value:  # resolved events may come with no value at all; other events may not
        events = [decode_event(i, k, None, tz, key_option) for i, k in enumerate(keys)]
        if any(e.get(REJECT_REASON) == "unpaired_key_value" for e in events):
            return [_rejected(0, Reject("unpaired_key_value", f"{len(keys)} event key(s), a row or DDL among "
                                        "them, but no value: the whole message is quarantined"))]
        return events  # a version-only key with no value is a valid, empty batch: no events
    return [decode_event(i, k, v, tz, key_option) for i, (k, v) in enumerate(zip(keys, values))]


def _framed(key: bytes | None, value: bytes | None) -> tuple[list[bytes], list[bytes], Reject | None]:
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


# -- Arrow batches ----------------------------------------------------------------------
def decode_batches(batches: Iterator[pa.RecordBatch], time_zone: str, key_option: KeyOption = NO_KEYS,
                   codec: str = "none", max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[pa.RecordBatch]:
    """`max_bytes`: the `max-message-bytes` option; a larger message is one reject, unread."""
    tz = zone(time_zone)
    for batch in batches:
        out = EventRows()
        big = oversized(batch, max_bytes)
        with gc_paused():
            for i, (k, v) in enumerate(zip(batch.column("key").to_pylist(), batch.column("value").to_pylist())):
                events = [_rejected(0, big[i])] if big and i in big else decode_message(k, v, tz, key_option, codec)
                for ev in events:
                    out.add(i, ev.pop("event_index"), ev.pop("event_kind"), reason=ev.pop(REJECT_REASON, None),
                            detail=ev.pop(REJECT_DETAIL, None), **ev)
        yield out.batch(batch)


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
        routing_ms = F.coalesce(F.shiftright("_max_ts", PHYSICAL_SHIFT), F.unix_millis(F.col("kafka_timestamp")))
        return routed.withColumn("routing_ms", routing_ms).select(
            *raw.columns, "routing_ms", "watermark_ts", EVENT_ROUTING_MS)

    def batch_function(self):
        return functools.partial(decode_batches, time_zone=self.options["time-zone"], key_option=self.key_option,
                                 codec=self.options[large_messages.OPTION], max_bytes=self.max_message_bytes)

    def decode(self, raw: DataFrame) -> DataFrame:
        parsed = raw.select(*PASSED).mapInArrow(self.batch_function(), PARSED_SCHEMA)
        # No separate event time; no source position (commit_ts is already a total order).
        return decoded_columns(parsed)

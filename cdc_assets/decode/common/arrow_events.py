"""Plumbing for decoders that parse messages in Python, one Arrow batch at a time
(`mapInArrow`): the reject exception, time zones, and event tuples -> an Arrow batch.

A decoder's batch function copies the lineage columns of each event's source message
(`take`) and builds the event columns in `EVENT_FIELDS` from plain Python values. The raw
key / value bytes are copied for rejected events only: they are all the quarantine needs,
and sending every message's bytes back to the JVM cost about a tenth of the decode.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, functions as F, types as T

from cdc_assets.common.tso import tso_time_col
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA, DECODED_COLUMNS, REJECT_DETAIL, REJECT_REASON, ROW
from cdc_assets.decode.common.spark_helpers import event_time_from_ms, lineage_columns


class Reject(Exception):
    """An event (or the rest of a message) that cannot be used: reason code + detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(reason, detail)
        self.reason, self.detail = reason, detail


#: TiCDC's sink option of the name: a message whose key and value together are larger is
#: quarantined unread (`message_too_large`). 16 MiB is above TiCDC's default (10 MiB) and
#: Kafka's broker default (1 MiB): no message a default setup can produce is refused.
MAX_MESSAGE_BYTES = "max-message-bytes"
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
TOO_LARGE = "message_too_large"
#: What the quarantine keeps of a too-large message's key and value: the first bytes (the
#: whole message is in raw_messages; its size and SHA-256 digests are in the detail).
KEPT_PREFIX_BYTES = 64 << 10


def oversized(batch: pa.RecordBatch, max_bytes: int) -> dict[int, Reject]:
    """Rows of `batch` whose key + value exceed `max_bytes`, each with its `message_too_large`
    reject. Sizes are Arrow kernels: a batch without such a message costs no Python loop."""
    sizes = [pc.fill_null(pc.binary_length(batch.column(c)), 0).cast(pa.int64()) for c in ("key", "value")]
    total = pc.add(*sizes)
    if len(total) == 0 or pc.max(total).as_py() <= max_bytes:
        return {}
    rows = pc.indices_nonzero(pc.greater(total, max_bytes)).to_pylist()
    return {i: too_large(batch.column("key")[i].as_py(), batch.column("value")[i].as_py(), max_bytes) for i in rows}


def too_large(key: bytes | None, value: bytes | None, max_bytes: int) -> Reject:
    digests = ", ".join(f"{name} SHA-256 {hashlib.sha256(b).hexdigest()}"
                        for name, b in (("value", value), ("key", key)) if b)
    return Reject(TOO_LARGE, f"{len(key or b'') + len(value or b'')} bytes (key {len(key or b'')}, value "
                             f"{len(value or b'')}), above max-message-bytes {max_bytes}: not decoded; {digests}; "
                             f"the quarantine keeps the first {KEPT_PREFIX_BYTES} bytes of each")


@functools.lru_cache(maxsize=16)
def zone(name: str) -> tzinfo:
    """`UTC`, an IANA zone name, or a fixed offset like `+08:00`."""
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name.strip())
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return timezone(-delta if m.group(1) == "-" else delta)
    return timezone.utc if name.strip().upper() in ("UTC", "Z") else ZoneInfo(name.strip())


_WALL_CLOCK_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?")


def timestamp_to_utc(text: str, tz: tzinfo) -> str:
    """TIMESTAMP text is the changefeed's wall clock; the change log holds UTC."""
    m = _WALL_CLOCK_RE.fullmatch(text)
    if tz is timezone.utc or not m or text.startswith("0000"):
        return text  # zero dates and odd forms are left for the snapshot's try_cast
    try:
        local = datetime(*(int(g) for g in m.groups()[:6]), tzinfo=tz)
        u = local.astimezone(timezone.utc)
    except (ValueError, OverflowError) as e:
        raise Reject("invalid_timestamp_value", f"{text!r} in {tz}: {e}") from None
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d} {u.hour:02d}:{u.minute:02d}:{u.second:02d}{m.group(7) or ''}"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Decoding a batch allocates many small, acyclic objects that stay alive until the batch
    is built: the cyclic collector would rescan them over and over (about 20% of the time).
    The batch is built, and its objects freed, inside: re-enabled with them still alive, the
    collector scanned them all once more (about 15% of the time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


STR_MAP = pa.map_(pa.string(), pa.string())
STR_LIST = pa.list_(pa.string())
# The event columns a batch function produces next to the lineage / key / value it copies.
EVENT_FIELDS = [
    ("event_index", pa.int32()), ("event_kind", pa.string()), ("op", pa.string()),
    ("database", pa.string()), ("table", pa.string()), ("commit_ts", pa.int64()),
    ("source_position", pa.int64()), ("event_ms", pa.int64()),
    ("pk_names", STR_LIST), ("pk_values", STR_LIST), ("before", STR_MAP), ("after", STR_MAP),
    ("column_types", STR_MAP), ("ddl_type", pa.string()), ("ddl_sql", pa.string()),
    ("watermark_ts", pa.int64()), (REJECT_REASON, pa.string()), (REJECT_DETAIL, pa.string()),
]
PASSED = [*lineage_columns(), "key", "value"]  # raw bytes last: `EventRows.batch` keeps them on rejects
_SPARK_FIELDS = {f.name: f for f in CHANGE_LOG_SCHEMA.fields}
_SPARK_EXTRA = {"key": T.BinaryType(), "value": T.BinaryType(), "event_ms": T.LongType()}
# The Spark schema of what a batch function yields (its `mapInArrow` schema).
PARSED_SCHEMA = T.StructType(
    [T.StructField(c, _SPARK_FIELDS[c].dataType if c in _SPARK_FIELDS else _SPARK_EXTRA[c], True) for c in PASSED]
    + [T.StructField(n, _SPARK_FIELDS[n].dataType if n in _SPARK_FIELDS else _SPARK_EXTRA.get(n, T.StringType()), True)
       for n, _ in EVENT_FIELDS]
)


def map_array(values) -> pa.Array:
    """dicts (or None) -> a map<string,string> array in one pass (no Arrow object per map)."""
    offsets, keys, items, mask = [0], [], [], []
    for d in values:
        if d is None:
            mask.append(True)
        else:
            mask.append(False)
            keys.extend(d)
            items.extend(d.values())
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(items, pa.string()),
        mask=pa.array(mask, pa.bool_()) if any(mask) else None,
    )


def shared_map_array(values) -> pa.Array:
    """`map_array` for a column whose equal maps are mostly one object (a table's column
    types, `canal_values.shared_types`): each distinct object is built once, then taken."""
    position: dict[int, int] = {}
    distinct, take = [], []
    for d in values:
        i = position.get(id(d))
        if i is None:
            i = position[id(d)] = len(distinct)
            distinct.append(d)
        take.append(i)
    if 2 * len(distinct) > len(values):
        return map_array(values)
    return map_array(distinct).take(pa.array(take, pa.int32()))


def as_text(v) -> str | None:
    """A JSON value read as text: strings as is; numbers, booleans, objects as their JSON
    (as Spark's JSON reader reads any value into a string field)."""
    if v is None or type(v) is str:
        return v
    if type(v) in (int, float):
        return str(v)
    try:
        return orjson.dumps(v).decode()
    except orjson.JSONEncodeError as e:  # nested deeper than the encoder writes (254 levels)
        raise Reject("unexpected_shape", f"a value cannot be read as text: {e}"[:500]) from None


_JSON_KINDS = {bool: "boolean", list: "array", dict: "object"}


def name_text(v, field: str) -> str | None:
    """A database / table name: a JSON string, else none at all. A name of another JSON type
    (`"table": 123`, `["orders"]`, `{"a": 1}`) quarantines the message (`unexpected_shape`):
    read as its text it would become a table (`shop.123`, `shop.["orders"]`). "" is no name."""
    if v is None or type(v) is str:
        return v or None
    raise Reject("unexpected_shape", f"`{field}` is a JSON {_JSON_KINDS.get(type(v), 'number')}, not a string")


_NAMES = [n for n, _ in EVENT_FIELDS]


def event(event_index: int, event_kind: str, reason: str | None = None, detail: str | None = None,
          **values) -> tuple:
    """One event tuple from keyword arguments named as in `EVENT_FIELDS` (absent = null)."""
    return (event_index, event_kind, *(values.get(n) for n in _NAMES[2:-2]), reason, detail)


_TEXT_FIELDS = [i for i, (_, typ) in enumerate(EVENT_FIELDS) if typ in (pa.string(), STR_LIST, STR_MAP)]


def _as_text_event(event: tuple) -> tuple:
    """An event with every text field's non-text values turned into text; raises `Reject`
    for a value that cannot be (JSON nested beyond what the encoder takes)."""
    out = list(event)
    for i in _TEXT_FIELDS:
        v = out[i]
        if type(v) is dict:
            out[i] = {as_text(k): as_text(x) for k, x in v.items()}
        elif type(v) is list:
            out[i] = [as_text(x) for x in v]
        else:
            out[i] = as_text(v)
    return tuple(out)


class EventRows:
    """Events as tuples in `EVENT_FIELDS` order, each with its source row; the Arrow
    columns are built once per batch. `row(...)` is the hot path: one tuple per event.

    Values are taken as they came out of the JSON parser: a column value that is a number or
    an object (rare) makes Arrow refuse the batch, which is then rebuilt with every such
    value written as its JSON text. Checking every value per message would cost more. A
    double may have rounded its number (orjson reads a fraction or an integer beyond 64 bits
    as one): the messages whose events hold one are decoded again by `redo`, exactly."""

    def __init__(self) -> None:
        self.source_rows: list[int] = []
        self.rows: list[tuple] = []

    def row(self, source_row: int, values: tuple) -> None:
        self.source_rows.append(source_row)
        self.rows.append(values)

    def add(self, source_row: int, event_index: int, event_kind: str, **values) -> None:
        self.row(source_row, event(event_index, event_kind, **values))

    def batch(self, batch: pa.RecordBatch,
              redo: Callable[[int], list[tuple]] | None = None) -> pa.RecordBatch:
        """The events of `batch`: its lineage columns taken per event, and its key / value
        on rejected events (null on the others). `redo(source_row)`: that message's events,
        decoded with exact numbers."""
        try:
            columns = self._columns(self.rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            self._as_text(redo)
            columns = self._columns(self.rows)
        reason = columns[_NAMES.index(REJECT_REASON)]
        if self.source_rows == list(range(batch.num_rows)):
            arrays = [batch.column(c) for c in PASSED]
            arrays[-2:] = _on_rejects_only(arrays[-2:], reason)
        else:
            take = pa.array(self.source_rows, pa.int64())
            # the raw bytes are taken for rejected events only: a message of many events
            # (Open Protocol) would otherwise copy its whole value once per event
            arrays = [batch.column(c).take(take) for c in PASSED[:-2]] + _rejects_raw(batch, take, reason)
        return pa.RecordBatch.from_arrays(arrays + columns, names=[*PASSED, *_NAMES])

    def _as_text(self, redo: Callable[[int], list[tuple]] | None) -> None:
        """Arrow refused the events: the messages whose events hold a double are decoded again
        by `redo`, then every non-text value of a text field is written as its JSON text. A
        message with a value that cannot be is one reject, as if its decoder had raised it."""
        if redo is not None:
            rounded = {s for s, e in zip(self.source_rows, self.rows) if _has_double(e)}
            self._replace({s: redo(s) for s in rounded})
        texts, failed = [], {}
        for s, e in zip(self.source_rows, self.rows):
            try:
                texts.append(_as_text_event(e))
            except Reject as err:
                texts.append(e)
                failed.setdefault(s, _rejected(err))
        self.rows = texts
        self._replace(failed)

    def _replace(self, events_by_source: dict[int, list[tuple]]) -> None:
        """The events of each source row in `events_by_source` replaced by the ones it maps to
        (a message's events are consecutive)."""
        if not events_by_source:
            return
        sources, rows, previous = [], [], None
        for s, e in zip(self.source_rows, self.rows):
            if s not in events_by_source:
                sources.append(s)
                rows.append(e)
            elif s != previous:
                again = events_by_source[s]
                sources += [s] * len(again)
                rows += again
            previous = s
        self.source_rows, self.rows = sources, rows

    @staticmethod
    def _columns(rows: list[tuple]) -> list[pa.Array]:
        columns = list(zip(*rows)) if rows else [()] * len(EVENT_FIELDS)
        return [(shared_map_array if name == "column_types" else map_array)(col) if typ == STR_MAP
                else pa.array(col, typ) for (name, typ), col in zip(EVENT_FIELDS, columns)]


def _has_double(event: tuple) -> bool:
    for i in _TEXT_FIELDS:
        v = event[i]
        if float in map(type, v.values() if type(v) is dict else v if type(v) is list else (v,)):
            return True
    return False


def _rejected(error: Exception) -> list[tuple]:
    """The one event of a message its decoder raised `error` for."""
    if isinstance(error, Reject):
        return [event(0, ROW, reason=error.reason, detail=error.detail)]
    # a shape no rule foresaw: this message is quarantined, never the batch
    return [event(0, ROW, reason="decoder_error", detail=f"{type(error).__name__}: {error}"[:500])]


def _events_or_reject(events_of: Callable[[bytes | None, tzinfo], list[tuple]], value: bytes | None,
                      tz: tzinfo) -> list[tuple]:
    try:
        return events_of(value, tz)
    except Exception as e:
        return _rejected(e)


def decode_each_value(batches: Iterator[pa.RecordBatch], time_zone: str,
                      events_of: Callable[[bytes | None, tzinfo], list[tuple]],
                      exact_events_of: Callable[[bytes | None, tzinfo], list[tuple]] | None = None,
                      unpack: Callable[[bytes], bytes] | None = None,
                      max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[pa.RecordBatch]:
    """A batch function for decoders that read a message from its value alone: `events_of`
    returns all of a message's events, or raises `Reject` for the whole message. Any other
    error quarantines that message (`decoder_error`), never the batch. `exact_events_of`
    decodes again, with exact numbers, a message whose events hold a double (`EventRows`).
    `unpack` (decompression) runs on each value first; rejects keep the bytes as landed.
    A message above `max_bytes` (as landed) is quarantined unread (`oversized`)."""
    tz = zone(time_zone)
    for batch in batches:
        with gc_paused():
            decoded = _decoded_batch(batch, tz, events_of, exact_events_of, unpack, max_bytes)
        yield decoded


def _decoded_batch(batch: pa.RecordBatch, tz: tzinfo, events_of: Callable[[bytes | None, tzinfo], list[tuple]],
                   exact_events_of: Callable[[bytes | None, tzinfo], list[tuple]] | None,
                   unpack: Callable[[bytes], bytes] | None, max_bytes: int) -> pa.RecordBatch:
    """`decode_each_value` of one batch. Called with the collector paused: its events are
    freed (by reference counting) when it returns, before the collector runs again, which
    would otherwise scan them all once more."""
    out = EventRows()
    big = oversized(batch, max_bytes)
    values = batch.column("value").to_pylist()
    if big:
        values = [None if i in big else v for i, v in enumerate(values)]
    if unpack is not None:
        values = [v if v is None else unpack(v) for v in values]
    sources, rows = out.source_rows, out.rows
    for i, value in enumerate(values):
        if big and i in big:
            events = _rejected(big[i])
        else:
            try:  # `_events_or_reject` inlined: the hot path
                events = events_of(value, tz)
            except Exception as e:
                events = _rejected(e)
        if len(events) == 1:
            sources.append(i)
            rows.append(events[0])
        else:
            sources += [i] * len(events)
            rows += events
    redo = None if exact_events_of is None else lambda i: _events_or_reject(exact_events_of, values[i], tz)
    return out.batch(batch, redo)


def _on_rejects_only(raw: list[pa.Array], reason: pa.Array) -> list[pa.Array]:
    if reason.null_count == len(reason):
        return [pa.nulls(len(reason), a.type) for a in raw]
    rejected = pc.is_valid(reason)
    return kept_bytes([pc.if_else(rejected, a, pa.scalar(None, a.type)) for a in raw], reason)


def _rejects_raw(batch: pa.RecordBatch, take: pa.Array, reason: pa.Array) -> list[pa.Array]:
    """The key / value of each event's source message (`take`) on rejected events, null on
    the others, copying no other event's bytes (a null index takes a null)."""
    raw = [batch.column(c) for c in PASSED[-2:]]
    if reason.null_count == len(reason):
        return [pa.nulls(len(reason), a.type) for a in raw]
    rejected_take = pc.if_else(pc.is_valid(reason), take, pa.scalar(None, pa.int64()))
    return kept_bytes([a.take(rejected_take) for a in raw], reason)


def kept_bytes(raw: list[pa.Array], reason: pa.Array) -> list[pa.Array]:
    """`raw` (key, value) with a too-large message's bytes cut to their first KEPT_PREFIX_BYTES."""
    big = pc.fill_null(pc.equal(reason, TOO_LARGE), False)
    if not pc.any(big).as_py():
        return raw
    return [pc.if_else(big, pc.binary_slice(a, 0, KEPT_PREFIX_BYTES), a) for a in raw]


def decoded_columns(parsed: DataFrame) -> DataFrame:
    """A batch function's output (`PARSED_SCHEMA`) -> the decoder contract (`DECODED_COLUMNS`)."""
    derived = {
        "commit_time": tso_time_col(F.col("commit_ts")),
        "event_time": event_time_from_ms(F.col("event_ms")),
    }
    return parsed.select(*[derived[c].alias(c) if c in derived else F.col(c) for c in DECODED_COLUMNS])

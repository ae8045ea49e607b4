"""Open Protocol messages -> change-log events, in plain Python per Arrow batch.

The rules are those of `open_protocol/decoder.py`'s docstring. A framing error quarantines
the whole message as one reject (event 0, `frames.py`); a bad event in a good frame
(invalid JSON, unknown type code) costs only that event.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import tzinfo

import pyarrow as pa

from cdc_assets.common.tidb_ddl_actions import ddl_action_name
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
from cdc_assets.decode.common import large_messages
from cdc_assets.decode.common.arrow_events import (
    DEFAULT_MAX_MESSAGE_BYTES,
    EventRows,
    Reject,
    gc_paused,
    name_text,
    oversized,
    zone,
)
from cdc_assets.decode.common.key_option import NO_KEYS, KeyOption
from cdc_assets.decode.open_protocol.frames import MAX_TSO, framed
from cdc_assets.decode.open_protocol.values import decode_image, parse_json

EVENT_KINDS = {1: ROW, 2: DDL, 3: WATERMARK}


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
    keys, values, err = framed(key, value)
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


def decode_batches(batches: Iterator[pa.RecordBatch], time_zone: str, key_option: KeyOption = NO_KEYS,
                   codec: str = "none", max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[pa.RecordBatch]:
    """`max_bytes`: the `max-message-bytes` option; a larger message is one reject, unread."""
    tz = zone(time_zone)
    for batch in batches:
        with gc_paused():  # the events are freed before the collector runs again (`gc_paused`)
            decoded = _decoded_batch(batch, tz, key_option, codec, max_bytes)
        yield decoded


def _decoded_batch(batch: pa.RecordBatch, tz: tzinfo, key_option: KeyOption, codec: str,
                   max_bytes: int) -> pa.RecordBatch:
    out = EventRows()
    big = oversized(batch, max_bytes)
    for i, (k, v) in enumerate(zip(batch.column("key").to_pylist(), batch.column("value").to_pylist())):
        events = [_rejected(0, big[i])] if big and i in big else decode_message(k, v, tz, key_option, codec)
        for ev in events:
            out.add(i, ev.pop("event_index"), ev.pop("event_kind"), reason=ev.pop(REJECT_REASON, None),
                    detail=ev.pop(REJECT_DETAIL, None), **ev)
    return out.batch(batch)

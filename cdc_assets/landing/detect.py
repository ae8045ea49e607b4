"""Which protocol a dump's messages are in, from a sample, in plain Python (no Spark).

Each message is recognised on its own by the marks only its protocol writes:
- Open Protocol: a Kafka key of 8-byte big-endian version 1 then length-framed JSON (an event
  key's `ohk` / `ccl`: large-message handling);
- Debezium: an envelope (`payload` with `op` / `ddl` / `source`, or those at the top);
  TiCDC's (`debezium`) has `source.commit_ts` or connector `TiCDC`, Debezium's own
  (`debezium-json`) has not; `schema` next to `payload` = schema on;
- CloudCanal JSON: `entryType`, `execTs` or `dbValType`;
- Canal-JSON: `isDdl` and `type`; `_tidb` or a TIDB_WATERMARK = TiCDC's extension on; a
  batch `id` > 0 = official Canal (TiCDC writes 0);
- Aliyun DTS Avro: a value that reads as DTS's Avro `Record`.
A Canal-JSON value (an Open Protocol event value) that is no JSON but decompresses (snappy
block, lz4 frame) to JSON is TiCDC's `large-message-handle-compression`.

A sample whose messages are of several protocols is an error naming each with where its first
message is: a dump is never decoded as a guess. Messages of no protocol are counted, not
candidates (a broken producer's garbage is quarantined by the decoder later).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from cdc_assets.decode import Protocol
from cdc_assets.decode.common import large_messages
from cdc_assets.decode.dts_avro.events import Reject as AvroReject, decode_value
from cdc_assets.decode.dts_avro.schema import parsed_record_schema
from cdc_assets.decode.open_protocol.frames import VERSION, split_frames
from cdc_assets.landing.layouts import UNPARSED_TOPIC, SampledMessage
from cdc_assets.landing.layouts.base import unparsed_place

_OPEN_PROTOCOL_VERSION = VERSION.to_bytes(8, "big")


@dataclass(frozen=True)
class Guess:
    """One message's protocol and what it shows of the producer's settings."""

    protocol: Protocol
    marks: frozenset[str] = frozenset()  # e.g. "tidb-extension", "schema", "compression=lz4"


@dataclass
class Detection:
    protocol: Protocol
    options: dict[str, str]
    facts: dict[str, str]  # what was seen, for people: extension, schema, compression, large messages
    recognised: int
    unrecognised: int
    first_unrecognised: str | None = None  # where, and the first bytes
    per_protocol: dict[Protocol, int] = field(default_factory=dict)


def where(m: SampledMessage) -> str:
    """The file, partition and offset of a message (the line of one that is no record)."""
    if m.topic == UNPARSED_TOPIC:
        return f"{m.source_file} {unparsed_place(m.kafka_offset)} (not a record of the layout)"
    return f"{m.source_file} partition {m.kafka_partition} offset {m.kafka_offset}"


def _json(value: bytes | None) -> tuple[object, str | None]:
    """(parsed JSON, compression codec) of a value; (None, None) when it is no JSON."""
    if not value:
        return None, None
    for codec in large_messages.CODECS:  # "none" first
        data = large_messages.decompress(value, codec)
        if codec != "none" and data is value:
            continue
        try:
            return orjson.loads(data), None if codec == "none" else codec
        except orjson.JSONDecodeError:
            continue
    return None, None


def _open_protocol(key: bytes | None, value: bytes | None) -> Guess | None:
    if not key or len(key) < 16 or key[:8] != _OPEN_PROTOCOL_VERSION:
        return None
    frames, err = split_frames(key, 8)
    if err is not None or not frames or not frames[0].lstrip().startswith(b"{"):
        return None
    marks = set()
    for frame in frames:  # event keys: TiCDC's large-message handling marks them
        k, _ = _json(frame)
        if isinstance(k, dict) and k.get("ccl"):
            marks.add("large-message=claim-check")
        elif isinstance(k, dict) and k.get("ohk"):
            marks.add("large-message=handle-key-only")
    for frame in split_frames(value or b"")[0][:1]:
        if frame and not frame.lstrip().startswith(b"{"):
            _, codec = _json(frame)
            if codec:
                marks.add(f"compression={codec}")
    return Guess(Protocol.OPEN_PROTOCOL, frozenset(marks))


def _debezium(m: dict) -> Guess | None:
    payload = m.get("payload") if isinstance(m.get("payload"), dict) else m
    if not any(k in payload for k in ("op", "ddl")) or not isinstance(payload.get("source"), dict):
        return None
    source = payload["source"]
    marks = {"schema" if "schema" in m and "payload" in m else "no-schema"}
    if payload.get("op") == "m":
        marks.add("tidb-extension")
    ticdc = "commit_ts" in source or source.get("connector") == "TiCDC"
    return Guess(Protocol.DEBEZIUM if ticdc else Protocol.DEBEZIUM_JSON, frozenset(marks))


def _canal(m: dict, codec: str | None) -> Guess | None:
    if any(k in m for k in ("entryType", "execTs", "dbValType")):
        return Guess(Protocol.CLOUDCANAL_JSON)
    if "isDdl" not in m or "type" not in m:
        return None
    marks = {f"compression={codec}"} if codec else set()
    tidb = m.get("_tidb")
    if isinstance(tidb, dict) or m.get("type") == "TIDB_WATERMARK":
        marks.add("tidb-extension")
        if isinstance(tidb, dict) and tidb.get("claimCheckLocation"):
            marks.add("large-message=claim-check")
        elif isinstance(tidb, dict) and tidb.get("onlyHandleKey"):
            marks.add("large-message=handle-key-only")
    elif type(m.get("id")) is int and m["id"] > 0:
        marks.add("official-canal")
    return Guess(Protocol.CANAL_JSON, frozenset(marks))


def _dts_avro(value: bytes | None) -> Guess | None:
    if not value or value[:1] in (b"{", b"["):
        return None
    try:
        rec = decode_value(value, parsed_record_schema())
    except AvroReject as r:
        return Guess(Protocol.DTS_AVRO) if r.reason != "invalid_avro" and r.reason != "empty_message" else None
    except Exception:  # noqa: BLE001 - any bytes that are no DTS record
        return None
    return Guess(Protocol.DTS_AVRO) if rec.get("operation") else None


def sniff_message(key: bytes | None, value: bytes | None) -> Guess | None:
    """The protocol of one message, or None when it is of none."""
    if (guess := _open_protocol(key, value)) is not None:
        return guess
    m, codec = _json(value)
    if isinstance(m, dict):
        return _debezium(m) or _canal(m, codec)
    return None if m is not None else _dts_avro(value)


def _options(protocol: Protocol, marks: Counter) -> tuple[dict[str, str], dict[str, str]]:
    """(decoder options, facts for people) from the marks the sample's messages showed."""
    codecs = sorted(m.split("=", 1)[1] for m in marks if m.startswith("compression="))
    large = sorted(m.split("=", 1)[1] for m in marks if m.startswith("large-message="))
    facts = {"compression": ",".join(codecs) or "none"}
    if large:
        facts["large-message-handle-option"] = ",".join(large)
    options: dict[str, str] = {}
    if codecs:
        options[large_messages.OPTION] = codecs[0]
    if protocol == Protocol.CANAL_JSON:
        ext = "tidb-extension" in marks
        options["enable-tidb-extension"] = "true" if ext else "false"
        facts["variant"] = ("TiCDC with the TiDB extension" if ext
                            else "official Canal" if "official-canal" in marks else "TiCDC without the TiDB extension")
        if not ext and "official-canal" in marks:
            options["content-compatible"] = "true"
    elif protocol in (Protocol.DEBEZIUM, Protocol.DEBEZIUM_JSON):
        facts["schema"] = "on" if "schema" in marks and "no-schema" not in marks else (
            "off" if "schema" not in marks else "mixed")
        if protocol == Protocol.DEBEZIUM:
            options["enable-tidb-extension"] = "true" if "tidb-extension" in marks else "false"
            options["debezium-disable-schema"] = "false" if "schema" in marks else "true"
            facts["watermarks"] = "checkpoint events" if "tidb-extension" in marks else "none seen"
    return options, facts


def detect_protocol(messages: Iterable[SampledMessage]) -> Detection:
    """The one protocol of the sample's messages, with the options they show; a sample of
    several protocols, or of none, is a ValueError naming what was seen and where."""
    counts: Counter = Counter()
    marks: dict[str, Counter] = {}
    first: dict[str, SampledMessage] = {}
    unknown, first_unknown = 0, None
    for m in messages:
        if m.topic == UNPARSED_TOPIC:  # not a message of the layout: counted by the landing
            continue
        guess = sniff_message(m.key, m.value)
        if guess is None:
            unknown += 1
            first_unknown = first_unknown or f"{where(m)}: first bytes {(m.value or b'')[:40]!r}"
            continue
        counts[guess.protocol] += 1
        first.setdefault(guess.protocol, m)
        marks.setdefault(guess.protocol, Counter()).update(guess.marks)
    if len(counts) > 1:
        seen = "; ".join(f"{p} ({n} messages, first at {where(first[p])})" for p, n in counts.most_common())
        raise ValueError(f"ambiguous dump: its messages are of {len(counts)} protocols: {seen}; "
                         "pass --protocol (and --input one topic's files)")
    if not counts:
        raise ValueError("cannot detect the protocol: " + (
            f"none of {unknown} sampled messages is of a known protocol (first: {first_unknown})"
            if unknown else "the dump holds no message"))
    protocol = next(iter(counts))
    options, facts = _options(protocol, marks[protocol])
    return Detection(protocol, options, facts, counts[protocol], unknown, first_unknown, dict(counts))


__all__ = ["Detection", "Guess", "detect_protocol", "sniff_message", "where"]

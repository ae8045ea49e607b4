"""The one small interface every protocol decoder implements (like TiCDC's codec package)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import ClassVar

import pyarrow as pa
from pyspark.sql import DataFrame

from cdc_assets.decode.common import kafka_time
from cdc_assets.decode.common.arrow_events import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_MESSAGE_BYTES,
    PARSED_SCHEMA,
    PASSED,
    decoded_columns,
    zone,
)
from cdc_assets.decode.common.key_option import parse_key_option


#: Options every decoder accepts. `time-zone`: the zone the producer wrote TIMESTAMP
#: wall-clock text in (TiCDC: the changefeed's `--tz`); the change log holds UTC.
#: `primary-key`: key columns for rows whose message names none (`key_option`).
#: `max-message-bytes`: a larger message (key + value, as landed) is `message_too_large`.
COMMON_OPTIONS: Mapping[str, str] = {"time-zone": "UTC", "primary-key": "",
                                     MAX_MESSAGE_BYTES: str(DEFAULT_MAX_MESSAGE_BYTES)}

#: Optional column `route` may add (array<long>, null for a message of one event): the physical
#: ms of each event of a message that batches several (Open Protocol). The landing places such
#: a message in the window of each of its events, and each window decodes its own events only
#: (`decode/window_events.py`).
EVENT_ROUTING_MS = "event_routing_ms"


class Decoder(ABC):
    """Turns raw Kafka messages (`RAW_MESSAGE_SCHEMA`) into change-log events.

    Decoders are pure DataFrame -> DataFrame transformations: no Spark actions, no I/O.
    """

    #: Protocol name, as in TiCDC's sink URI (`canal-json`, `open-protocol`, ...).
    name: ClassVar[str]
    #: Options this decoder understands (TiCDC's option names), with their defaults.
    default_options: ClassVar[Mapping[str, str]] = {}
    #: Options that take one of a few values.
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: The boolean option (one of `default_options`) that says whether the protocol's
    #: watermarks / markers come and advance the landing watermark; None: they never do.
    watermark_option: ClassVar[str | None] = None

    def __init__(self, options: Mapping[str, str] | None = None):
        known = {**COMMON_OPTIONS, **self.default_options}
        unknown = set(options or {}) - set(known)
        if unknown:
            raise ValueError(
                f"{self.name}: unknown option(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        self.options = {**known, **(options or {})}
        # Bad values fail here, on the driver, when the definitions load: not in a run.
        for name, default in known.items():
            if default in ("true", "false") and str(self.options[name]).lower() not in ("true", "false"):
                raise ValueError(f"{self.name}: option {name} is true or false, got {self.options[name]!r}")
        for name, choices in self.option_choices.items():
            self.options[name] = str(self.options[name]).lower()
            if self.options[name] not in choices:
                raise ValueError(f"{self.name}: option {name} is one of {', '.join(choices)}, "
                                 f"got {self.options[name]!r}")
        try:
            zone(self.options["time-zone"])
        except (KeyError, ValueError):  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"{self.name}: time-zone {self.options['time-zone']!r} is not UTC, an IANA zone "
                             "or an offset like +08:00") from None
        #: the parsed `primary-key` option
        self.key_option = parse_key_option(self.options["primary-key"])
        #: the `max-message-bytes` option
        self.max_message_bytes = _positive_int(self.name, MAX_MESSAGE_BYTES, self.options[MAX_MESSAGE_BYTES])

    def flag(self, option: str) -> bool:
        """A boolean option ("true"/"false", as TiCDC's sink URI writes them)."""
        return str(self.options.get(option, "false")).lower() == "true"

    @property
    def kafka_commit_time(self) -> bool:
        """`commit-time=kafka-timestamp` (decoders that offer it): times from Kafka (`kafka_time`)."""
        return self.options.get(kafka_time.OPTION) == kafka_time.KAFKA_TIMESTAMP

    def commit_order(self) -> str:
        """Which order the change log's commit_ts and source_position give (asset metadata)."""
        return kafka_time.ORDER[kafka_time.KAFKA_TIMESTAMP if self.kafka_commit_time else kafka_time.MESSAGE]

    def emits_watermarks(self) -> bool:
        """Whether the protocol (with these options) carries watermarks / resolved ts.
        Sources without them decide completeness by event time instead."""
        return self.watermark_option is not None and self.flag(self.watermark_option)

    def batch_function(self) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
        """The plain-Python function `decode` maps over Arrow batches of messages (`PASSED`
        columns in, `PARSED_SCHEMA`'s out), for decoders that parse in Python."""
        raise NotImplementedError(f"{self.name} decodes in Spark only")

    def python_events(self, batch: pa.RecordBatch) -> list[dict]:
        """The events of a batch of raw messages (`PASSED` columns) decoded without Spark
        (`cdc-assets inspect`): dicts named as `arrow_events.EVENT_FIELDS`."""
        return [row for out in self.batch_function()(iter([batch])) for row in out.to_pylist()]

    def routes_by_kafka_timestamp(self) -> bool:
        """Whether the Kafka record timestamp is this source's own time (a producer that writes
        no event time). Otherwise the landing hides it from `route` and applies it as the
        fallback itself, counting the messages that needed it (`landing.routing.unroutable_reason`)."""
        return self.kafka_commit_time

    @abstractmethod
    def route(self, raw: DataFrame) -> DataFrame:
        """Add `routing_ms` (long: the physical time that picks the message's window) and
        `watermark_ts` (long, null unless the message carries a watermark / resolved ts);
        a protocol that batches events of several commit times in one message also adds
        `EVENT_ROUTING_MS`.

        Must be cheap: it runs when a dump is landed, before full decoding.
        """

    def decode(self, raw: DataFrame) -> DataFrame:
        """Return `DECODED_COLUMNS`: the change-log columns, the raw `key` / `value`, and
        `_reject_reason` / `_reject_detail`.

        A row with a non-null `_reject_reason` is quarantined; it must still carry the
        lineage columns and its message's raw `key` / `value`. Other rows may leave the raw
        bytes null (the decode step refills them by lineage for events rejected after
        decoding).

        Here: `batch_function` mapped over Arrow batches of the messages, then the Kafka
        record's time and offset as commit time and position with `commit-time=kafka-timestamp`.
        A decoder that decodes in Spark overrides it.
        """
        decoded = decoded_columns(raw.select(*PASSED).mapInArrow(self.batch_function(), PARSED_SCHEMA))
        return kafka_time.with_kafka_commit_time(decoded) if self.kafka_commit_time else decoded


def _positive_int(decoder: str, option: str, value) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise ValueError(f"{decoder}: option {option} is a number of bytes above 0, got {value!r}")
    return n

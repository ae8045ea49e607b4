"""The changefeed -> Kafka leg: partitions, offsets, watermarks, and an at-least-once restart.

Routing (TiCDC's index-value dispatcher): a row goes to hash(database, table, primary
key) mod N, so every version of a key lands in one partition in commit order. DDL goes
to partition 0 (Canal-JSON) or to all partitions, as the encoder says. Watermarks are
broadcast to every partition each `watermark_interval_ms` of commit time, with ts =
boundary << 18: every commit below it has already been sent (commits never have logical 0).

Batching (TiCDC's `max-batch-size`, for encoders that batch, like Open Protocol): row events
of one partition are held and sent as one message of up to `encoder.batch_events` events; a
watermark or a DDL first sends what is held (everything below a resolved ts goes before it).
With watermarks that are not on window ends (`watermark_phase_ms`), a batch holds commits on
both sides of a window end, as real ones do.

The restart, as TiCDC does it after a crash: the checkpoint had stalled for a few
intervals (watermarks withheld while rows kept flowing), the changefeed dies, comes back
from an older checkpoint C and re-sends everything committed after C, re-emitting the
watermarks from C on. In a partition whose last watermark was W, a re-sent row with
commit_ts < W is a *late* duplicate, one with commit_ts >= W a plain *duplicate*.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from cdc_assets.simulator.encoder import Encoder
from cdc_assets.simulator.tso import make_tso, tso_physical_ms
from cdc_assets.simulator.values import tidb_text
from cdc_assets.simulator.workload import DdlEvent, Event, RowChange, Transaction


@dataclass(frozen=True)
class KafkaMessage:
    partition: int
    offset: int
    timestamp_ms: int  # CreateTime, set by the producer
    key: bytes | None
    value: bytes


@dataclass(frozen=True)
class RestartPlan:
    crash_ms: int  # the changefeed dies before sending the first commit at/after this time
    stalled_intervals: int = 4  # watermarks withheld just before the crash (checkpoint lag)
    rewind_intervals: int = 4  # checkpoint C = last sent watermark W minus this many intervals
    downtime_ms: int = 30_000

    @classmethod
    def in_the_middle(cls, start_ms: int, duration_ms: int, watermark_interval_ms: int) -> RestartPlan:
        return cls(crash_ms=start_ms + duration_ms // 2 + watermark_interval_ms // 2)


@dataclass
class TopicStats:
    row_events: int = 0  # row messages, re-sent ones included
    watermarks: int = 0  # watermark messages (one per partition per watermark)
    ddl: int = 0
    duplicates: int = 0  # re-sent rows with commit_ts >= the partition's last watermark W
    late: int = 0  # re-sent rows with commit_ts < W
    messages: int = 0
    final_watermark_ts: int | None = None
    restart: dict | None = None  # checkpoint_ts (C), last_watermark_ts (W), times
    partition_messages: list[int] = field(default_factory=list)


class TopicSimulator:
    """Push workload events in commit order with `send`, then call `finish`."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        partitions: int = 3,
        watermark_interval_ms: int = 60_000,
        watermark_phase_ms: int = 0,
        restart: RestartPlan | None = None,
        seed: int = 7,
    ):
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self.encoder = encoder
        self.partitions = partitions
        self.interval = watermark_interval_ms
        self.phase = watermark_phase_ms % watermark_interval_ms
        self._held: dict[int, list] = {}  # partition -> (key, value) of row events not yet sent
        self.plan = restart
        self.rng = random.Random(seed * 1_000_003 + 17)  # independent of the workload's stream
        self.stats = TopicStats(partition_messages=[0] * partitions)
        self._next_offset = [0] * partitions
        self._clock = 0
        self._next_boundary: int | None = None
        self._first_boundary: int | None = None
        self._last_watermark_ts: int | None = None
        self._last_commit_ts: int | None = None
        self._buffer: list[Event] = []  # events sent after the future checkpoint C
        self._pending = restart is not None
        if restart is not None:
            w_b = self._boundary_at_or_below(restart.crash_ms - restart.stalled_intervals * self.interval)
            self._w_boundary = w_b
            self._c_boundary = w_b - restart.rewind_intervals * self.interval

    # -- public ---------------------------------------------------------------------
    def send(self, event: Event) -> Iterator[KafkaMessage]:
        physical = tso_physical_ms(event.commit_ts)
        if self._next_boundary is None:
            self._first_boundary = self._next_boundary = self._boundary_at_or_below(physical) + self.interval
            self._clock = physical
            self._check_plan()
        if self._pending and physical >= self.plan.crash_ms:
            yield from self._restart()
        yield from self._watermarks_until(physical)
        if self._pending and physical >= self._c_boundary:
            self._buffer.append(event)
        yield from self._send_event(event, resend=False)
        self._last_commit_ts = event.commit_ts

    def finish(self) -> Iterator[KafkaMessage]:
        yield from self._flush()
        # A crash planned after the data ends still happens, if W was actually sent.
        if self._pending and (self._last_watermark_ts or -1) >= make_tso(self._w_boundary):
            yield from self._restart()
        self._pending = False
        if self._last_commit_ts is None:
            return
        # Just above the last commit, so below the end of the last window: that window
        # must stay incomplete, all earlier ones are complete.
        ts = self._last_commit_ts + 1
        self.stats.final_watermark_ts = ts
        yield from self._broadcast_watermark(ts, tso_physical_ms(ts))

    # -- internals ------------------------------------------------------------------
    def _boundary_at_or_below(self, ms: int) -> int:
        return (ms - self.phase) // self.interval * self.interval + self.phase

    def _check_plan(self) -> None:
        """Drop a restart that does not fit the run (W and C must be real watermarks)."""
        if not self._pending:
            return
        self._c_boundary = max(self._c_boundary, self._first_boundary)
        if self._w_boundary < self._first_boundary + self.interval:
            self._pending = False

    def _watermarks_until(self, physical: int) -> Iterator[KafkaMessage]:
        while self._next_boundary <= physical:
            b = self._next_boundary
            self._next_boundary += self.interval
            if self._pending and b > self._w_boundary:
                continue  # checkpoint stalled: TiCDC does not advance the watermark
            yield from self._broadcast_watermark(make_tso(b), b)

    def _restart(self) -> Iterator[KafkaMessage]:
        self._pending = False
        checkpoint = make_tso(self._c_boundary)
        last_sent = self._last_watermark_ts
        crash_clock = self._clock
        self._clock += self.plan.downtime_ms
        self.stats.restart = {
            "checkpoint_ts": checkpoint,
            "last_watermark_ts": last_sent,
            "crash_kafka_ms": crash_clock,
            "resume_kafka_ms": self._clock,
        }
        # The restarted changefeed announces its checkpoint, then replays from it.
        yield from self._broadcast_watermark(checkpoint, self._clock)
        b = self._c_boundary + self.interval
        for event in self._buffer:
            physical = tso_physical_ms(event.commit_ts)
            while b <= physical:
                yield from self._broadcast_watermark(make_tso(b), self._clock)
                b += self.interval
            yield from self._send_event(event, resend=True, late_below=last_sent)
        # Boundaries that were withheld during the stall are emitted from here on.
        self._next_boundary = b
        self._buffer = []

    def _send_event(self, event: Event, *, resend: bool, late_below: int | None = None) -> Iterator[KafkaMessage]:
        # Sent a little after commit (TiCDC latency); re-sends go out as fast as possible.
        due = self._clock if resend else tso_physical_ms(event.commit_ts) + self.rng.randint(200, 1500)
        if isinstance(event, DdlEvent):
            yield from self._flush()
            key, value = self.encoder.encode_ddl(event, build_ms=self._tick(due))
            targets = range(self.partitions) if self.encoder.ddl_to_all_partitions else (0,)
            for p in targets:
                self.stats.ddl += 1
                yield self._append(p, key, value)
            return
        assert isinstance(event, Transaction)
        for change in event.changes:
            key, value = self.encoder.encode_row(change, event.commit_ts, build_ms=self._tick(due))
            self.stats.row_events += 1
            if resend:
                if late_below is not None and event.commit_ts < late_below:
                    self.stats.late += 1
                else:
                    self.stats.duplicates += 1
            yield from self._send_row(self._partition_of(change), key, value)

    def _send_row(self, partition: int, key: bytes | None, value: bytes) -> Iterator[KafkaMessage]:
        if self.encoder.batch_events <= 1:
            yield self._append(partition, key, value)
            return
        held = self._held.setdefault(partition, [])
        held.append((key, value))
        if len(held) >= self.encoder.batch_events:
            yield from self._flush(partition)

    def _flush(self, partition: int | None = None) -> Iterator[KafkaMessage]:
        """Send the held row events (of one partition, or of all) as one message each."""
        for p in sorted(self._held) if partition is None else [partition]:
            held = self._held.pop(p, [])
            if held:
                yield self._append(p, *self.encoder.merge(held))

    def _broadcast_watermark(self, ts: int, due: int) -> Iterator[KafkaMessage]:
        yield from self._flush()
        kv = self.encoder.encode_watermark(ts, build_ms=self._tick(due + self.rng.randint(50, 500)))
        if kv is None:
            return
        self._last_watermark_ts = ts if self._last_watermark_ts is None else max(self._last_watermark_ts, ts)
        key, value = kv
        for p in range(self.partitions):
            self.stats.watermarks += 1
            yield self._append(p, key, value)

    def _tick(self, due: int) -> int:
        """Advance the simulated wall clock (never backwards) and return it."""
        self._clock = max(self._clock, due) + self.rng.randint(0, 2)
        return self._clock

    def _append(self, partition: int, key: bytes | None, value: bytes) -> KafkaMessage:
        offset = self._next_offset[partition]
        self._next_offset[partition] = offset + 1
        self.stats.messages += 1
        self.stats.partition_messages[partition] += 1
        # Producer CreateTime: the build time plus batching latency.
        return KafkaMessage(partition, offset, self._clock + 1, key, value)

    def _partition_of(self, change: RowChange) -> int:
        table = self.encoder.table(change.database, change.table)
        row = change.row
        parts = [change.database, change.table]
        parts.extend(tidb_text(c, row[c.name]) for c in table.columns if c.primary_key)
        return zlib.crc32("\x00".join(parts).encode("utf-8")) % self.partitions


__all__ = ["KafkaMessage", "RestartPlan", "TopicSimulator", "TopicStats"]

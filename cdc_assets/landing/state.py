"""The landing state: which files were landed and how far each Kafka partition got.

Global watermark = the minimum over Kafka partitions of each partition's progress. A
window [start, end) is complete once the global watermark TSO reaches `end_ms << 18`.
A partition's progress depends on the source's completeness mode:
- `watermark`: the highest watermark message seen in it (TiCDC resolved ts); a
  partition with no watermark yet holds everything back;
- `event-time`: the highest event time seen in it minus an allowed lateness (sources
  with no watermark: official Canal, CloudCanal, plain Debezium, DTS);
- `batch`: the dump is declared complete, so every window with data is complete.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from cdc_assets.common.tso import ms_to_tso, tso_to_ms
from cdc_assets.landing.layouts import UNPARSED_TOPIC


# A source's completeness setting may also be `auto`: watermarks when the source has them,
# else event time (defs/source_build.py).
AUTO_COMPLETENESS = "auto"


class CompletenessMode(StrEnum):
    """How a window is known to be complete (module docstring)."""

    WATERMARK = "watermark"
    EVENT_TIME = "event-time"
    BATCH = "batch"

    @classmethod
    def parse(cls, text: str) -> "CompletenessMode":
        """The mode named `text`; a ValueError naming the known ones."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"completeness mode {text!r} is not one of {tuple(m.value for m in cls)}") from None


@dataclass(frozen=True)
class Completeness:
    mode: CompletenessMode = CompletenessMode.WATERMARK
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", CompletenessMode.parse(self.mode))  # text from a CLI or config


def _partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def add_counts(into: dict[str, int], counts: Mapping[str, int]) -> None:
    """Counts by reason added into `into` (the unroutable messages of a partition or a file)."""
    for reason, n in counts.items():
        into[reason] = into.get(reason, 0) + n


def _newer(current: int | None, value: int | None) -> int | None:
    """The larger of two maxima, None meaning none seen."""
    return current if value is None or (current is not None and current >= value) else value


@dataclass
class PartitionProgress:
    """How far one Kafka partition got: in the state over all landings, in `BatchStats` over
    one batch. Stored as a JSON object of these names; the optional ones only once known."""

    topic: str
    kafka_partition: int
    messages: int = 0
    max_offset: int | None = None
    max_watermark_ts: int | None = None
    max_routing_ms: int | None = None
    # Messages without a usable time of their protocol, by reason (`routing.UNROUTABLE_REASON`).
    unroutable: dict[str, int] = field(default_factory=dict)
    # Wall clock (epoch seconds): the first landing of the partition, and the landing since
    # which its watermark has held.
    first_landed_at: float | None = None
    watermark_since: float | None = None
    # Watermarks reported, never trusted (landing/watermark_audit.py), over all landings.
    regressed_watermarks: int | None = None
    implausible_watermarks: int | None = None

    @property
    def key(self) -> str:
        return _partition_key(self.topic, self.kafka_partition)

    def merge(self, other: "PartitionProgress") -> None:
        """`other`'s messages added and maxima taken: a watermark that moves backwards (a
        replayed resolved ts) is ignored."""
        self.messages += other.messages
        add_counts(self.unroutable, other.unroutable)
        self.max_offset = _newer(self.max_offset, other.max_offset)
        self.max_watermark_ts = _newer(self.max_watermark_ts, other.max_watermark_ts)
        self.max_routing_ms = _newer(self.max_routing_ms, other.max_routing_ms)

    def unroutable_messages(self) -> int:
        return sum(self.unroutable.values())

    _OPTIONAL = ("first_landed_at", "watermark_since", "regressed_watermarks", "implausible_watermarks")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PartitionProgress":
        return cls(data["topic"], data["kafka_partition"], data["messages"], data["max_offset"],
                   data["max_watermark_ts"], data["max_routing_ms"], dict(data.get("unroutable", {})),
                   **{name: data.get(name) for name in cls._OPTIONAL})

    def to_json(self) -> dict[str, Any]:
        out = {"topic": self.topic, "kafka_partition": self.kafka_partition, "messages": self.messages,
               "max_offset": self.max_offset, "max_watermark_ts": self.max_watermark_ts,
               "max_routing_ms": self.max_routing_ms}
        if self.unroutable:
            out["unroutable"] = self.unroutable
        out.update({name: getattr(self, name) for name in self._OPTIONAL if getattr(self, name) is not None})
        return out


@dataclass(frozen=True)
class FileFingerprint:
    """A file seen before: its digest is reused while its size and mtime stay the same."""

    size: int
    mtime_ns: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "digest": self.digest}


@dataclass
class UnroutableFile:
    """A landed file's messages, and those of them without a usable time, by reason."""

    messages: int = 0
    unroutable: dict[str, int] = field(default_factory=dict)

    @property
    def wholly_unroutable(self) -> bool:
        return bool(self.messages) and sum(self.unroutable.values()) == self.messages

    def to_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "unroutable": self.unroutable}


@dataclass(frozen=True)
class BatchRecord:
    """One committed landing batch: a window's reader reads the rows of the batches that
    list it (and, for messages with no usable time, of those whose `unroutable_window` it is)."""

    batch_id: str
    files: int
    messages: int
    windows: tuple[int, ...] = ()
    unroutable_window: int | None = None  # the window its messages without a usable time joined

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "BatchRecord":
        return cls(data["batch_id"], data["files"], data["messages"], tuple(data.get("windows", ())),
                   data.get("unroutable_window"))

    def to_json(self) -> dict[str, Any]:
        out = {"batch_id": self.batch_id, "files": self.files, "messages": self.messages,
               "windows": list(self.windows)}
        if self.unroutable_window is not None:
            out["unroutable_window"] = self.unroutable_window
        return out


@dataclass(frozen=True)
class BatchStats:
    """What one landing batch adds to the state (counted by landing/batch_stats.py)."""

    messages: int
    partitions: list[PartitionProgress]
    windows: dict[int, int]  # window_start_ms -> messages landed in it (with copies of straddling batches)
    implausible_watermarks: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> messages
    unroutable_files: dict[str, UnroutableFile] = field(default_factory=dict)  # files with any only
    first_unroutable: dict | None = None  # file, topic, partition, offset, reason, first bytes
    unroutable_window: int | None = None  # the window its messages without a usable time joined


@dataclass
class LandingState:
    partitions: dict[str, PartitionProgress] = field(default_factory=dict)
    windows: dict[int, int] = field(default_factory=dict)
    batches: list[BatchRecord] = field(default_factory=list)
    landed_digests: set[str] = field(default_factory=set)
    fingerprints: dict[str, FileFingerprint] = field(default_factory=dict)
    window_ms: int | None = None  # the width the landed folders are keyed by
    # Per landed file with messages without a usable time of their protocol; and the first
    # such message ever landed.
    unroutable_files: dict[str, UnroutableFile] = field(default_factory=dict)
    first_unroutable: dict | None = None

    # -- persistence -------------------------------------------------------------
    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LandingState":
        return cls(
            partitions={k: PartitionProgress.from_json(p) for k, p in data.get("partitions", {}).items()},
            windows={int(k): int(v) for k, v in data.get("windows", {}).items()},
            batches=[BatchRecord.from_json(b) for b in data.get("batches", [])],
            landed_digests=set(data.get("landed_digests", [])),
            fingerprints={k: FileFingerprint(**f) for k, f in data.get("fingerprints", {}).items()},
            window_ms=data.get("window_ms"),
            unroutable_files={k: UnroutableFile(f["messages"], dict(f["unroutable"]))
                              for k, f in data.get("unroutable_files", {}).items()},
            first_unroutable=data.get("first_unroutable"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "partitions": {k: p.to_json() for k, p in self.partitions.items()},
            "windows": {str(k): v for k, v in sorted(self.windows.items())},
            "batches": [b.to_json() for b in self.batches],
            "landed_digests": sorted(self.landed_digests),
            "fingerprints": {k: f.to_json() for k, f in self.fingerprints.items()},
            "window_ms": self.window_ms,
            "unroutable_files": {k: f.to_json() for k, f in self.unroutable_files.items()},
            "first_unroutable": self.first_unroutable,
            "global_watermark_ts": self.global_watermark_ts(),
        }

    def to_document(self) -> str:
        """The JSON text stored in the `landing_state` table (landing/tables.py)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), default=str)

    def check_window_ms(self, window_ms: int) -> None:
        """Landed messages are filed by window; another width would silently miss data."""
        if self.window_ms is None:
            self.window_ms = window_ms
        elif self.window_ms != window_ms:
            raise ValueError(
                f"this landing area was built with {self.window_ms // 60000}-minute windows, not "
                f"{window_ms // 60000}: use the same width or a new warehouse"
            )

    # -- files -------------------------------------------------------------------
    def known_digest(self, path: Path) -> str | None:
        """Digest of a file seen before with the same size and mtime (saves re-hashing)."""
        st = path.stat()
        fp = self.fingerprints.get(str(path))
        if fp and fp.size == st.st_size and fp.mtime_ns == st.st_mtime_ns:
            return fp.digest
        return None

    def remember_file(self, path: Path, digest: str) -> None:
        st = path.stat()
        self.fingerprints[str(path)] = FileFingerprint(st.st_size, st.st_mtime_ns, digest)

    # -- batches -----------------------------------------------------------------
    def apply_batch(self, batch_id: str, digests: list[str], stats: BatchStats, now: float | None = None) -> None:
        now = time.time() if now is None else now  # wall clock: how long a partition waits
        for p in stats.partitions:
            cur = self.partitions.setdefault(p.key, PartitionProgress(p.topic, p.kafka_partition))
            if cur.first_landed_at is None:
                cur.first_landed_at = now
            if p.max_watermark_ts is not None and (cur.max_watermark_ts is None
                                                   or p.max_watermark_ts > cur.max_watermark_ts):
                cur.watermark_since = now  # the last watermark has held since this landing
            cur.merge(p)
        for window, n in stats.windows.items():
            self.windows[int(window)] = self.windows.get(int(window), 0) + n
        self.batches.append(BatchRecord(batch_id, len(digests), stats.messages,
                                        tuple(sorted(int(w) for w in stats.windows)), stats.unroutable_window))
        self.unroutable_files.update(stats.unroutable_files)  # a file is landed once (by content)
        if self.first_unroutable is None:
            self.first_unroutable = stats.first_unroutable
        self.landed_digests.update(digests)

    def record_ignored_watermarks(self, regressed: dict[str, int], implausible: dict[str, int]) -> None:
        """Cumulative per-partition counts of watermarks that were reported, never trusted."""
        for field_name, counts in (("regressed_watermarks", regressed), ("implausible_watermarks", implausible)):
            for key, n in counts.items():
                if key in self.partitions:
                    p = self.partitions[key]
                    setattr(p, field_name, (getattr(p, field_name) or 0) + n)

    def apply_checkpoint(self, checkpoint_ts: int | None, now: float | None = None) -> None:
        """A layout-level watermark (TiCDC storage sink's checkpoint-ts) covers every stream."""
        if checkpoint_ts is None:
            return
        for p in self.partitions.values():
            if p.max_watermark_ts is None or checkpoint_ts > p.max_watermark_ts:
                p.max_watermark_ts = checkpoint_ts
                p.watermark_since = time.time() if now is None else now

    # -- watermarks --------------------------------------------------------------
    def kafka_partitions(self) -> list[PartitionProgress]:
        return [p for p in self.partitions.values() if p.topic != UNPARSED_TOPIC]

    def global_watermark_ts(self, policy: Completeness = Completeness()) -> int | None:
        parts = self.kafka_partitions()
        if not parts:
            return None
        if policy.mode == CompletenessMode.BATCH:
            newest = max((p.max_routing_ms or 0) for p in parts)
            return ms_to_tso(newest + 1)
        if policy.mode == CompletenessMode.EVENT_TIME:
            if any(p.max_routing_ms is None for p in parts):
                return None
            return ms_to_tso(min(p.max_routing_ms for p in parts) - policy.allowed_lateness_ms)
        if any(p.max_watermark_ts is None for p in parts):
            return None
        return min(p.max_watermark_ts for p in parts)

    def is_complete(self, window_end_ms: int, policy: Completeness = Completeness()) -> bool:
        if policy.mode == CompletenessMode.BATCH:
            return bool(self.kafka_partitions())
        wm = self.global_watermark_ts(policy)
        return wm is not None and wm >= ms_to_tso(window_end_ms)

    def complete_windows(self, window_ms: int, policy: Completeness = Completeness()) -> list[int]:
        """Window starts (with data) whose end the global watermark has passed."""
        return sorted(w for w in self.windows if self.is_complete(w + window_ms, policy))

    def partition_watermarks(self) -> dict[str, dict]:
        """Per Kafka partition: watermark TSO and its lag (ms) behind the newest message."""
        out = {}
        for key, p in sorted(self.partitions.items()):
            if p.topic == UNPARSED_TOPIC:
                continue
            wm = p.max_watermark_ts
            lag = None
            if wm is not None and p.max_routing_ms is not None:
                lag = max(0, p.max_routing_ms - tso_to_ms(wm))
            out[key] = {"watermark_ts": wm, "lag_ms": lag, "max_offset": p.max_offset,
                        # wall-clock time since the watermark last moved, or since the first
                        # landing of the partition when it has none (unknown in states without it)
                        "since": p.watermark_since if wm is not None else p.first_landed_at,
                        "unroutable": p.unroutable_messages()}
        return out

    def unroutable_messages(self) -> int:
        return sum(p.unroutable_messages() for p in self.partitions.values())

    def unroutable_by_reason(self) -> dict[str, int]:
        """Landed messages without a usable time of their protocol, by reason."""
        reasons: dict[str, int] = {}
        for p in self.partitions.values():
            add_counts(reasons, p.unroutable)
        return reasons

    def partitions_without_watermark(self) -> list[str]:
        return [p.key for p in self.kafka_partitions() if p.max_watermark_ts is None]

    def whole_unroutable_files(self, names: list[str] | None = None) -> list[str]:
        """Files (of `names`, default all) none of whose messages has a usable time."""
        return [n for n, f in sorted(self.unroutable_files.items())
                if (names is None or n in names) and f.wholly_unroutable]

    def messages(self) -> int:
        """Messages landed, over every partition."""
        return sum(p.messages for p in self.partitions.values())

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

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_assets.landing.layouts import UNPARSED_TOPIC
from cdc_assets.common.tso import ms_to_tso, tso_to_ms

if TYPE_CHECKING:
    from cdc_assets.landing.land import BatchStats


WATERMARK_MODE, EVENT_TIME_MODE, BATCH_MODE = "watermark", "event-time", "batch"
COMPLETENESS_MODES = (WATERMARK_MODE, EVENT_TIME_MODE, BATCH_MODE)


@dataclass(frozen=True)
class Completeness:
    mode: str = WATERMARK_MODE
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        if self.mode not in COMPLETENESS_MODES:
            raise ValueError(f"completeness mode {self.mode!r} is not one of {COMPLETENESS_MODES}")


def _partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


@dataclass
class LandingState:
    partitions: dict[str, dict] = field(default_factory=dict)
    windows: dict[int, int] = field(default_factory=dict)
    batches: list[dict] = field(default_factory=list)
    landed_digests: set[str] = field(default_factory=set)
    fingerprints: dict[str, dict] = field(default_factory=dict)
    window_ms: int | None = None  # the width the landed folders are keyed by
    # Messages without a usable time of their protocol, per file (`land.UNROUTABLE_REASON`):
    # {"messages": n, "unroutable": {reason: n}}; and the first such message ever landed.
    unroutable_files: dict[str, dict] = field(default_factory=dict)
    first_unroutable: dict | None = None

    # -- persistence -------------------------------------------------------------
    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LandingState":
        return cls(
            partitions=dict(data.get("partitions", {})),
            windows={int(k): int(v) for k, v in data.get("windows", {}).items()},
            batches=list(data.get("batches", [])),
            landed_digests=set(data.get("landed_digests", [])),
            fingerprints=dict(data.get("fingerprints", {})),
            window_ms=data.get("window_ms"),
            unroutable_files=dict(data.get("unroutable_files", {})),
            first_unroutable=data.get("first_unroutable"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "partitions": self.partitions,
            "windows": {str(k): v for k, v in sorted(self.windows.items())},
            "batches": self.batches,
            "landed_digests": sorted(self.landed_digests),
            "fingerprints": self.fingerprints,
            "window_ms": self.window_ms,
            "unroutable_files": self.unroutable_files,
            "first_unroutable": self.first_unroutable,
            "global_watermark_ts": self.global_watermark_ts(),
        }

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
        if fp and fp["size"] == st.st_size and fp["mtime_ns"] == st.st_mtime_ns:
            return fp["digest"]
        return None

    def remember_file(self, path: Path, digest: str) -> None:
        st = path.stat()
        self.fingerprints[str(path)] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": digest}

    # -- batches -----------------------------------------------------------------
    def apply_batch(self, batch_id: str, digests: list[str], stats: "BatchStats", now: float | None = None) -> None:
        now = time.time() if now is None else now  # wall clock: how long a partition waits
        for p in stats.partitions:
            key = _partition_key(p["topic"], p["kafka_partition"])
            cur = self.partitions.setdefault(
                key,
                {"topic": p["topic"], "kafka_partition": p["kafka_partition"], "messages": 0,
                 "max_offset": None, "max_watermark_ts": None, "max_routing_ms": None},
            )
            cur["messages"] += p["messages"]
            cur.setdefault("first_landed_at", now)
            if p["max_watermark_ts"] is not None and (
                    cur["max_watermark_ts"] is None or p["max_watermark_ts"] > cur["max_watermark_ts"]):
                cur["watermark_since"] = now  # the last watermark has held since this landing
            for reason, n in p.get("unroutable", {}).items():
                counts = cur.setdefault("unroutable", {})
                counts[reason] = counts.get(reason, 0) + n
            for name in ("max_offset", "max_watermark_ts", "max_routing_ms"):
                # max(): a watermark that moves backwards (a replayed resolved ts) is ignored.
                if p[name] is not None and (cur[name] is None or p[name] > cur[name]):
                    cur[name] = p[name]
        for window, n in stats.windows.items():
            self.windows[int(window)] = self.windows.get(int(window), 0) + n
        # The windows it landed messages in: a window's reader reads these batches' rows only.
        entry = {"batch_id": batch_id, "files": len(digests), "messages": stats.messages,
                 "windows": sorted(int(w) for w in stats.windows)}
        if stats.unroutable_window is not None:
            entry["unroutable_window"] = stats.unroutable_window
        self.batches.append(entry)
        for name, f in stats.unroutable_files.items():
            self.unroutable_files[name] = f  # a file is landed once (by content)
        if self.first_unroutable is None:
            self.first_unroutable = stats.first_unroutable
        self.landed_digests.update(digests)

    def record_ignored_watermarks(self, regressed: dict[str, int], implausible: dict[str, int]) -> None:
        """Cumulative per-partition counts of watermarks that were reported, never trusted."""
        for field_name, counts in (("regressed_watermarks", regressed), ("implausible_watermarks", implausible)):
            for key, n in counts.items():
                if key in self.partitions:
                    p = self.partitions[key]
                    p[field_name] = p.get(field_name, 0) + n

    def apply_checkpoint(self, checkpoint_ts: int | None, now: float | None = None) -> None:
        """A layout-level watermark (TiCDC storage sink's checkpoint-ts) covers every stream."""
        if checkpoint_ts is None:
            return
        for p in self.partitions.values():
            if p["max_watermark_ts"] is None or checkpoint_ts > p["max_watermark_ts"]:
                p["max_watermark_ts"] = checkpoint_ts
                p["watermark_since"] = time.time() if now is None else now

    # -- watermarks --------------------------------------------------------------
    def kafka_partitions(self) -> list[dict]:
        return [p for p in self.partitions.values() if p["topic"] != UNPARSED_TOPIC]

    def global_watermark_ts(self, policy: Completeness = Completeness()) -> int | None:
        parts = self.kafka_partitions()
        if not parts:
            return None
        if policy.mode == BATCH_MODE:
            newest = max((p["max_routing_ms"] or 0) for p in parts)
            return ms_to_tso(newest + 1)
        if policy.mode == EVENT_TIME_MODE:
            if any(p["max_routing_ms"] is None for p in parts):
                return None
            return ms_to_tso(min(p["max_routing_ms"] for p in parts) - policy.allowed_lateness_ms)
        if any(p["max_watermark_ts"] is None for p in parts):
            return None
        return min(p["max_watermark_ts"] for p in parts)

    def is_complete(self, window_end_ms: int, policy: Completeness = Completeness()) -> bool:
        if policy.mode == BATCH_MODE:
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
            if p["topic"] == UNPARSED_TOPIC:
                continue
            wm = p["max_watermark_ts"]
            lag = None
            if wm is not None and p["max_routing_ms"] is not None:
                lag = max(0, p["max_routing_ms"] - tso_to_ms(wm))
            out[key] = {"watermark_ts": wm, "lag_ms": lag, "max_offset": p["max_offset"],
                        # wall-clock time since the watermark last moved, or since the first
                        # landing of the partition when it has none (older states: unknown)
                        "since": p.get("watermark_since") if wm is not None else p.get("first_landed_at"),
                        "unroutable": sum(p.get("unroutable", {}).values())}
        return out

    def unroutable_messages(self) -> int:
        return sum(sum(p.get("unroutable", {}).values()) for p in self.partitions.values())

    def partitions_without_watermark(self) -> list[str]:
        return [f"{p['topic']}/{p['kafka_partition']}" for p in self.kafka_partitions() if p["max_watermark_ts"] is None]

    def whole_unroutable_files(self, names: list[str] | None = None) -> list[str]:
        """Files (of `names`, default all) none of whose messages has a usable time."""
        return [n for n, f in sorted(self.unroutable_files.items())
                if (names is None or n in names) and f["messages"] and sum(f["unroutable"].values()) == f["messages"]]

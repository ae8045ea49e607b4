"""`cdc-assets inspect`: what a dump holds and what a replay of it would do, without Spark.

The layout and the protocol are detected (`layouts.detect_layout`, `detect.detect_protocol`)
unless given; then every message (up to `max_messages`) is read by the layout's plain-Python
reader and decoded by the decoder's own Python batch function, and counted the way the
landing counts (`landing.state.LandingState`): per Kafka partition its offsets, first and
last commit time and last watermark; the windows with data, which are complete and what
holds the others back; the tables with their key and column types; the messages a replay
would quarantine, by reason; and the `cdc-assets replay` command to run.
"""

from __future__ import annotations

import itertools
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from cdc_assets.common.tso import PHYSICAL_SHIFT, ms_to_tso, tso_to_ms
from cdc_assets.contracts.schemas import DDL, REJECT_DETAIL, REJECT_REASON, ROW, WATERMARK
from cdc_assets.decode import get_decoder
from cdc_assets.landing.detect import Detection, detect_protocol, where
from cdc_assets.landing.layouts import AUTO_LAYOUT, detect_layout
from cdc_assets.landing.layouts import UNPARSED_TOPIC, DumpLayout, SampledMessage, get_layout, sniff_layouts
from cdc_assets.landing.state import AUTO_COMPLETENESS, Completeness, CompletenessMode, LandingState, PartitionProgress

SAMPLE_PER_FILE = 200  # detection reads the first messages of each file ...
SAMPLE_MESSAGES = 2_000  # ... up to this many in all
BATCH_ROWS = 4_096
MAX_BLOCKERS = 5  # partitions named per incomplete window


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def detection_sample(layout: DumpLayout, files: list[Path], root: Path) -> list[SampledMessage]:
    """The first messages of each file (a topic's files may start with another producer's)."""
    out: list[SampledMessage] = []
    for path in files:
        out += itertools.islice(layout.sample([path], root), SAMPLE_PER_FILE)
        if len(out) >= SAMPLE_MESSAGES:
            break
    return out[:SAMPLE_MESSAGES]


@dataclass(frozen=True)
class Resolved:
    """The layout and protocol a replay or an inspection uses, and why."""

    layout: str
    layout_why: str
    protocol: str
    options: dict[str, str]
    detection: Detection | None  # None: the protocol was given
    layout_options: dict[str, str] = field(default_factory=dict)  # as given (`DumpLayout.default_options`)

    def describe(self) -> str:
        text = f"layout {self.layout} ({self.layout_why}), protocol {self.protocol}"
        if self.detection is not None:
            d = self.detection
            facts = ", ".join(f"{k} {v}" for k, v in d.facts.items())
            text += f" (detected from {d.recognised} sampled messages: {facts})"
        opts = " ".join(f"{k}={v}" for k, v in self.options.items())
        layout_opts = " ".join(f"{k}={v!r}" for k, v in self.layout_options.items())
        return (text + (f" with options {opts}" if opts else "")
                + (f" with layout options {layout_opts}" if layout_opts else ""))


def resolve(root: Path, layout: str = AUTO_LAYOUT, protocol: str = "auto",
            options: dict[str, str] | None = None, layout_options: dict[str, str] | None = None) -> Resolved:
    """The layout and protocol of the dump under `root`: as given, or detected from a sample
    (ValueError naming the candidates when the dump is ambiguous). Detected options are
    overridden by the given ones; `layout_options` are the layout's (an unknown one is a
    ValueError naming the layout's)."""
    if layout == AUTO_LAYOUT:
        name = detect_layout(root)
        why = f"detected: {sniff_layouts(root)[name]}"
    else:
        name, why = layout, "given"
    lay = get_layout(name, layout_options)
    detection = None
    detected_options: dict[str, str] = {}
    if protocol == "auto":
        files = lay.list_files(root)
        if not files:
            raise ValueError(f"cannot detect the protocol: no {name} data file under {root}")
        detection = detect_protocol(detection_sample(lay, files, root))
        protocol, detected_options = detection.protocol, detection.options
    return Resolved(name, why, protocol, {**detected_options, **(options or {})}, detection, dict(layout_options or {}))


def _messages(layout: DumpLayout, files: list[Path], root: Path, limit: int) -> Iterator[list[SampledMessage]]:
    it = itertools.islice(layout.sample(files, root), limit)
    while batch := list(itertools.islice(it, BATCH_ROWS)):
        yield batch


def _arrow(batch: list[SampledMessage]) -> pa.RecordBatch:
    """Messages as the Arrow batch a decoder's batch function reads (`PASSED` columns)."""
    return pa.RecordBatch.from_arrays([
        pa.array([m.topic for m in batch], pa.string()),
        pa.array([m.kafka_partition for m in batch], pa.int32()),
        pa.array([m.kafka_offset for m in batch], pa.int64()),
        pa.array([None if m.timestamp_ms is None else m.timestamp_ms * 1000 for m in batch], pa.timestamp("us", "UTC")),
        pa.array([m.key for m in batch], pa.binary()),
        pa.array([m.value for m in batch], pa.binary()),
    ], names=["topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "key", "value"])


def _routing_ms(ev: dict, message: SampledMessage) -> int | None:
    """The window-picking time of an event, as the decoders' `route` picks it."""
    for ts in (ev.get("watermark_ts") if ev["event_kind"] == WATERMARK else None, ev.get("commit_ts")):
        if ts is not None and ts > 0:
            return ts >> PHYSICAL_SHIFT
    return ev.get("event_ms") or message.timestamp_ms


class _Tally:
    """What the messages say, gathered as they are decoded."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], dict] = {}
        self.windows: Counter = Counter()  # window start -> messages (a batch counts in each of its windows)
        self.row_windows: Counter = Counter()  # window start -> row events
        self.tables: dict[str, dict] = {}
        self.rejects: dict[str, dict] = {}
        self.messages = self.unparsed = 0

    def add(self, batch: list[SampledMessage], events: list[dict], window_ms: int) -> None:
        by_message: dict[tuple, list[dict]] = {}
        for ev in events:
            by_message.setdefault((ev["topic"], ev["kafka_partition"], ev["kafka_offset"]), []).append(ev)
        for m in batch:
            self.messages += 1
            if m.topic == UNPARSED_TOPIC:
                self.unparsed += 1
                self._reject("not_a_record", f"not a message of the layout: {(m.value or b'')[:40]!r}", m)
                continue
            p = self.partitions.setdefault((m.topic, m.kafka_partition), {
                "topic": m.topic, "kafka_partition": m.kafka_partition, "messages": 0, "min_offset": None,
                "max_offset": None, "min_commit_ts": None, "max_commit_ts": None, "max_watermark_ts": None,
                "max_routing_ms": None})
            p["messages"] += 1
            p["min_offset"] = m.kafka_offset if p["min_offset"] is None else min(p["min_offset"], m.kafka_offset)
            p["max_offset"] = m.kafka_offset if p["max_offset"] is None else max(p["max_offset"], m.kafka_offset)
            windows = set()
            for ev in by_message.get((m.topic, m.kafka_partition, m.kafka_offset), []):
                self._event(ev, m, p, windows, window_ms)
            for w in windows:
                self.windows[w] += 1

    def _event(self, ev: dict, m: SampledMessage, p: dict, windows: set, window_ms: int) -> None:
        routing = _routing_ms(ev, m)
        if routing is not None:
            windows.add(routing - routing % window_ms)
            p["max_routing_ms"] = max(p["max_routing_ms"] or routing, routing)
        if ev.get(REJECT_REASON):
            self._reject(ev[REJECT_REASON], ev.get(REJECT_DETAIL), m)
            return
        if ev["event_kind"] == WATERMARK:
            wm = ev.get("watermark_ts")
            if wm is not None:
                p["max_watermark_ts"] = max(p["max_watermark_ts"] or wm, wm)
            return
        ts = ev.get("commit_ts")
        if ts is not None:
            p["min_commit_ts"] = min(p["min_commit_ts"] or ts, ts)
            p["max_commit_ts"] = max(p["max_commit_ts"] or ts, ts)
        if not ev.get("table"):
            return
        t = self.tables.setdefault(f"{ev['database']}.{ev['table']}",
                                   {"key": None, "columns": {}, "row_events": 0, "ddl": 0})
        if ev["event_kind"] == DDL:
            t["ddl"] += 1
        elif ev["event_kind"] == ROW:
            t["row_events"] += 1
            t["key"] = ev.get("pk_names") or t["key"]
            types = dict(ev.get("column_types") or {})  # Arrow's map: a list of pairs
            t["columns"].update({k: v for k, v in types.items() if v is not None})
            if routing is not None:
                self.row_windows[routing - routing % window_ms] += 1

    def _reject(self, reason: str, detail: str | None, m: SampledMessage) -> None:
        r = self.rejects.setdefault(reason, {"count": 0, "first": where(m), "detail": detail})
        r["count"] += 1


def _blockers(state: LandingState, end_ms: int, policy: Completeness) -> list[str]:
    """Why a window ending at `end_ms` is not complete: the partitions holding it back, by reason."""
    by_reason: dict[str, list[str]] = {}
    for p in state.kafka_partitions():
        name = f"{p.topic} partition {p.kafka_partition}"
        reason = None
        if policy.mode == CompletenessMode.WATERMARK:
            wm = p.max_watermark_ts
            if wm is None:
                reason = "no watermark yet"
            elif wm < ms_to_tso(end_ms):
                reason = f"watermark at {iso_ms(tso_to_ms(wm))}"
        elif policy.mode == CompletenessMode.EVENT_TIME:
            newest = p.max_routing_ms
            if newest is None or newest - policy.allowed_lateness_ms < end_ms:
                reason = f"newest event at {iso_ms(newest)}" + (
                    f" (minus {policy.allowed_lateness_ms} ms lateness)" if policy.allowed_lateness_ms else "")
        if reason is not None:
            by_reason.setdefault(reason, []).append(name)
    return [", ".join(names[:MAX_BLOCKERS]) + (f" and {len(names) - MAX_BLOCKERS} more" if len(names) > MAX_BLOCKERS
                                                else "") + f": {reason}" for reason, names in by_reason.items()]


def replay_command(input_location: str, resolved: Resolved, window_minutes: int, time_zone: str,
                   warehouse: str = "WAREHOUSE_DIR") -> str:
    args = ["cdc-assets", "replay", "--protocol", resolved.protocol, "--input", input_location,
            "--warehouse", warehouse, "--layout", resolved.layout]
    for k, v in resolved.options.items():
        args += ["--option", f"{k}={v}"]
    for k, v in resolved.layout_options.items():
        args += ["--layout-option", f"{k}={v}"]
    if time_zone != "UTC":
        args += ["--time-zone", time_zone]
    if window_minutes != 60:
        args += ["--window-minutes", str(window_minutes)]
    return shlex.join(args)


def inspect_dump(root: Path, *, input_location: str | None = None, layout: str = AUTO_LAYOUT, protocol: str = "auto",
                 options: dict[str, str] | None = None, layout_options: dict[str, str] | None = None,
                 window_minutes: int = 60, time_zone: str = "UTC",
                 completeness: str = AUTO_COMPLETENESS, allowed_lateness_seconds: int = 0,
                 max_messages: int = 1_000_000) -> dict:
    """The inspection report of the dump under `root` (module docstring), as JSON-ready data."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no such folder: {root}")
    resolved = resolve(root, layout, protocol, options, layout_options)
    lay = get_layout(resolved.layout, resolved.layout_options)
    decoder = get_decoder(resolved.protocol, {"time-zone": time_zone, **resolved.options})
    window_ms = window_minutes * 60_000
    files = lay.list_files(root)
    tally = _Tally()
    for batch in _messages(lay, files, root, max_messages):
        tally.add(batch, decoder.python_events(_arrow(batch)), window_ms)

    checkpoint = lay.checkpoint_ts(root)
    if completeness == AUTO_COMPLETENESS:
        has_marks = decoder.emits_watermarks() or checkpoint is not None
        completeness = CompletenessMode.WATERMARK if has_marks else CompletenessMode.EVENT_TIME
    policy = Completeness(completeness, allowed_lateness_seconds * 1000)
    state = LandingState(partitions={f"{t}/{p}": _progress(v) for (t, p), v in tally.partitions.items()},
                         windows=dict(tally.windows))
    state.apply_checkpoint(checkpoint)
    complete = set(state.complete_windows(window_ms, policy))
    global_wm = state.global_watermark_ts(policy) if policy.mode != CompletenessMode.BATCH else None
    return {
        "input": input_location or str(root),
        "layout": {"name": resolved.layout, "why": resolved.layout_why, "options": resolved.layout_options},
        "protocol": {
            "name": resolved.protocol, "detected": resolved.detection is not None, "options": resolved.options,
            "facts": resolved.detection.facts if resolved.detection else {},
            "sampled_messages": resolved.detection.recognised if resolved.detection else 0,
            "unrecognised_in_sample": resolved.detection.unrecognised if resolved.detection else 0,
        },
        "files": len(files),
        "messages": tally.messages,
        "truncated": tally.messages >= max_messages,
        "completeness": policy.mode.value,
        "window_minutes": window_minutes,
        "checkpoint_ts": checkpoint,
        "global_watermark_ts": global_wm,
        "global_watermark_time": iso_ms(None if global_wm is None else tso_to_ms(global_wm)),
        "partitions": [_partition_report(p, state.partitions[f"{t}/{k}"])
                       for (t, k), p in sorted(tally.partitions.items())],
        "windows": [
            {"start": iso_ms(w), "end": iso_ms(w + window_ms), "messages": n, "row_events": tally.row_windows[w],
             "complete": w in complete,
             "blocked_by": [] if w in complete else _blockers(state, w + window_ms, policy)}
            for w, n in sorted(tally.windows.items())
        ],
        "complete_windows": len(complete),
        "tables": [{"table": name, **t} for name, t in sorted(tally.tables.items())],
        "rejects": dict(sorted(tally.rejects.items())),
        "replay_command": replay_command(input_location or str(root), resolved, window_minutes, time_zone),
    }


def _progress(p: dict) -> PartitionProgress:
    """A partition's tally as the landing state counts it (what completeness reads)."""
    return PartitionProgress(p["topic"], p["kafka_partition"], p["messages"], p["max_offset"], p["max_watermark_ts"],
                             p["max_routing_ms"])


def _partition_report(p: dict, progress: PartitionProgress) -> dict:
    """A partition's tally; its watermark as the state has it (a storage sink's checkpoint too)."""
    def time_of(ts):
        return None if ts is None else iso_ms(tso_to_ms(ts))

    return {
        "topic": p["topic"], "partition": p["kafka_partition"], "messages": p["messages"],
        "min_offset": p["min_offset"], "max_offset": p["max_offset"],
        "first_commit_ts": p["min_commit_ts"], "first_commit_time": time_of(p["min_commit_ts"]),
        "last_commit_ts": p["max_commit_ts"], "last_commit_time": time_of(p["max_commit_ts"]),
        "last_watermark_ts": progress.max_watermark_ts, "last_watermark_time": time_of(progress.max_watermark_ts),
    }


def render_text(report: dict) -> str:
    """The report for people."""
    proto = report["protocol"]
    lines = [
        f"input:       {report['input']}",
        f"layout:      {report['layout']['name']} ({report['layout']['why']}), {report['files']} file(s), "
        f"{report['messages']} message(s)" + (" (stopped at --max-messages)" if report["truncated"] else "")
        + "".join(f"; {k}={v!r}" for k, v in report["layout"]["options"].items()),
        f"protocol:    {proto['name']} ("
        + (f"detected from {proto['sampled_messages']} sampled messages" if proto["detected"] else "given")
        + "".join(f", {k} {v}" for k, v in proto["facts"].items()) + ")"
        + (f"; options {' '.join(f'{k}={v}' for k, v in proto['options'].items())}" if proto["options"] else ""),
        f"windows:     {report['window_minutes']} min, completeness {report['completeness']}, "
        f"{report['complete_windows']} of {len(report['windows'])} complete; "
        f"global watermark {report['global_watermark_time'] or 'none yet'}",
        "",
        "partitions (offsets, commit times, last watermark):",
    ]
    for p in report["partitions"]:
        lines.append(f"  {p['topic']} [{p['partition']}]  offsets {p['min_offset']}..{p['max_offset']} "
                     f"({p['messages']} messages)  commits {p['first_commit_time']} .. {p['last_commit_time']}  "
                     f"watermark {p['last_watermark_time'] or 'none yet'}")
    lines += ["", "windows:"]
    for w in report["windows"]:
        state = "complete" if w["complete"] else "waiting: " + "; ".join(w["blocked_by"] or ["-"])
        lines.append(f"  {w['start']} .. {w['end']}  {w['messages']} messages, {w['row_events']} row events  {state}")
    lines += ["", "tables (key; column types):"]
    for t in report["tables"]:
        cols = ", ".join(f"{k} {v}" for k, v in t["columns"].items())
        lines.append(f"  {t['table']}  key ({', '.join(t['key'] or []) or 'none'}); {t['row_events']} row events, "
                     f"{t['ddl']} DDL; {cols}")
    if report["rejects"]:
        lines += ["", "would be quarantined:"]
        for reason, r in report["rejects"].items():
            lines.append(f"  {reason}: {r['count']} (first at {r['first']}: {r['detail']})")
    lines += ["", "replay with:", f"  {report['replay_command']}"]
    return "\n".join(lines)


__all__ = ["Resolved", "inspect_dump", "render_text", "replay_command", "resolve"]

"""Small renderers for Dagster metadata: Markdown tables and charts people read in the UI."""

from __future__ import annotations

import hashlib
import json
import math
import time

from cdc_assets.common.tso import tso_to_datetime
from cdc_assets.defs.plots import bar_chart_svg, svg_markdown
from cdc_assets.landing.state import LandingState

# Charts get at most this many bars: wider windows are binned (a daily window -> 24-min bars).
MAX_BARS = 60


def watermark_table(state: LandingState, now: float | None = None) -> str:
    """Per Kafka partition: its watermark ("none yet") and for how long it has held, how far
    it lags behind the newest commit (routing time) seen in that partition, and how many of
    its messages had no usable time of their protocol."""
    lines = ["| topic/partition | watermark ts | watermark time (UTC) | for how long | lag behind newest commit (ms) "
             "| max offset | unroutable messages |",
             "|---|---|---|---|---|---|---|"]
    now = time.time() if now is None else now
    for key, p in state.partition_watermarks().items():
        wm = p["watermark_ts"]
        lines.append(
            f"| {key} | {wm if wm is not None else 'none yet'} | "
            f"{tso_to_datetime(wm).isoformat() if wm is not None else 'none yet'} | "
            f"{_held_for(p['since'], now)} | "
            f"{p['lag_ms'] if p['lag_ms'] is not None else '—'} | {p['max_offset']} | {p['unroutable']} |"
        )
    return "\n".join(lines)


def _held_for(since: float | None, now: float) -> str:
    """Wall-clock time the partition's watermark (or its lack of one) has held: since it last
    moved, or since the partition was first landed."""
    if since is None:
        return "—"
    seconds = max(0, int(now - since))
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min" if hours else f"{rest // 60} min {rest % 60} s"


def watermark_lag_chart(state: LandingState) -> str:
    """Bars of each partition's watermark lag (seconds); a partition without a watermark
    yet is labelled so, since it holds the global watermark back entirely."""
    bars = [(f"{key}" if p["lag_ms"] is not None else f"{key} (no watermark)",
             (p["lag_ms"] or 0) / 1000) for key, p in state.partition_watermarks().items()]
    return svg_markdown(bar_chart_svg(bars, "watermark lag behind newest commit, per Kafka partition", " s"),
                        "watermark lag per partition")


def events_per_minute_chart(counts: dict[int, int], window_start_ms: int, window_ms: int) -> str:
    """`counts` maps minute start (ms) to events. Every minute of the window gets a bar
    (quiet minutes show as gaps); windows wider than MAX_BARS minutes are binned."""
    minutes = max(window_ms // 60_000, 1)
    bin_minutes = math.ceil(minutes / MAX_BARS)
    bins = [0] * math.ceil(minutes / bin_minutes)
    for minute_ms, n in counts.items():
        i = (minute_ms - window_start_ms) // 60_000 // bin_minutes
        if 0 <= i < len(bins):
            bins[i] += n
    label = "minute" if bin_minutes == 1 else f"{bin_minutes} minutes"
    bars = [(_hhmm(window_start_ms + i * bin_minutes * 60_000), n) for i, n in enumerate(bins)]
    return svg_markdown(bar_chart_svg(bars, f"events per {label} (commit time, UTC)"), f"events per {label}")


def table_rows_chart(rows: dict[str, int]) -> str:
    """Rows per table id."""
    bars = sorted(rows.items())
    return svg_markdown(bar_chart_svg(bars, "rows per table at the window end"), "rows per table")


def schema_version(spark_schema_json: str) -> str:
    """A short hash of a table's column names and Spark types: it changes exactly when the
    snapshot's schema does (a column added, dropped or re-typed)."""
    fields = [(f["name"], json.dumps(f["type"], sort_keys=True)) for f in json.loads(spark_schema_json)["fields"]]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:8]


def counts_table(counts: dict[str, int], header: tuple[str, str]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    return "\n".join(lines)


def _hhmm(ms: int) -> str:
    return tso_to_datetime(ms << 18).strftime("%H:%M")

"""Small renderers for Dagster metadata (Markdown tables people read in the UI)."""

from __future__ import annotations

from cdc_assets.lib.tso import tso_to_datetime
from cdc_assets.lib.watermark_state import LandingState


def watermark_table(state: LandingState) -> str:
    lines = ["| topic/partition | watermark ts | watermark time (UTC) | lag behind newest (ms) | max offset |",
             "|---|---|---|---|---|"]
    for key, p in state.partition_watermarks().items():
        wm = p["watermark_ts"]
        lines.append(
            f"| {key} | {wm if wm is not None else '—'} | "
            f"{tso_to_datetime(wm).isoformat() if wm is not None else '—'} | "
            f"{p['lag_ms'] if p['lag_ms'] is not None else '—'} | {p['max_offset']} |"
        )
    return "\n".join(lines)


def counts_table(counts: dict[str, int], header: tuple[str, str]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    return "\n".join(lines)

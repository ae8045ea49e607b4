"""Metadata renderers: schema versions, and the SVG charts embedded in Markdown."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

from pyspark.sql import types as T

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.defs.metadata import events_per_minute_chart, schema_version, watermark_lag_chart
from cdc_assets.landing.state import LandingState, PartitionProgress

W0 = 1767225600000  # 2026-01-01T00:00Z
SVG = "{http://www.w3.org/2000/svg}"


def _svg(markdown: str) -> ET.Element:
    m = re.fullmatch(r"!\[[^\]]*\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert m, markdown[:80]
    return ET.fromstring(base64.b64decode(m.group(1)))


def _bars(svg: ET.Element) -> list[tuple[str, float]]:
    """(hover title, height) of every bar."""
    return [(r.find(f"{SVG}title").text, float(r.get("height"))) for r in svg.iter(f"{SVG}rect")
            if r.find(f"{SVG}title") is not None]


def test_schema_version_changes_with_a_column_or_a_type_only():
    a = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("name", T.StringType())])
    retyped = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])
    added = T.StructType(a.fields + [T.StructField("email", T.StringType())])
    nullable = T.StructType([T.StructField("id", T.IntegerType(), False), T.StructField("name", T.StringType())])
    assert re.fullmatch(r"[0-9a-f]{8}", schema_version(a.json()))
    assert schema_version(a.json()) == schema_version(nullable.json())  # nullability is not the schema
    assert len({schema_version(s.json()) for s in (a, retyped, added)}) == 3


def test_events_per_minute_has_a_bar_per_minute_and_gaps_for_quiet_ones():
    counts = {W0: 4, W0 + 60_000: 2, W0 + 59 * 60_000: 8}
    bars = _bars(_svg(events_per_minute_chart(counts, W0, 3_600_000)))
    assert len(bars) == 60
    assert [t for t, _ in bars[:2]] == ["00:00: 4", "00:01: 2"] and bars[-1][0] == "00:59: 8"
    assert bars[2][1] == 0 and bars[-1][1] == max(h for _, h in bars)
    assert bars[0][1] == bars[-1][1] / 2


def test_events_per_minute_bins_wide_windows():
    day = 24 * 3_600_000
    bars = _bars(_svg(events_per_minute_chart({W0: 1, W0 + 23 * 60_000: 1, W0 + day - 60_000: 5}, W0, day)))
    assert len(bars) == 60  # 24-minute bins
    assert bars[0][0] == "00:00: 2" and bars[-1][0] == "23:36: 5"


def test_watermark_lag_chart_has_a_bar_per_partition():
    state = LandingState()
    state.partitions = {
        "t/0": PartitionProgress("t", 0, messages=3, max_offset=2, max_watermark_ts=ms_to_tso(W0),
                                 max_routing_ms=W0 + 1500),
        "t/1": PartitionProgress("t", 1, messages=1, max_offset=0, max_watermark_ts=None, max_routing_ms=W0),
    }
    assert [t for t, _ in _bars(_svg(watermark_lag_chart(state)))] == ["t/0: 1.50 s", "t/1 (no watermark): 0 s"]

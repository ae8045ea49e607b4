"""Tiny SVG bar charts for Dagster metadata: a picture where a person would rather look than
read (events per minute, watermark lag per partition).

No plotting dependency: the SVG is written by hand and embedded in Markdown as a data URI
(`![title](data:image/svg+xml;base64,…)`), which the Dagster UI renders as an image. The
inputs are already-aggregated counts (a few dozen numbers), never raw rows.
"""

from __future__ import annotations

import base64
from html import escape

WIDTH, HEIGHT, MARGIN_LEFT, MARGIN_BOTTOM, MARGIN_TOP = 480, 160, 48, 28, 20


def bar_chart_svg(bars: list[tuple[str, float]], title: str, unit: str = "") -> str:
    """A vertical bar chart of (label, value) pairs; the first and last labels are written
    under the axis, every bar has a hover title with its label and value."""
    plot_w, plot_h = WIDTH - MARGIN_LEFT - 8, HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    top = max((v for _, v in bars), default=0) or 1
    step = plot_w / max(len(bars), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="10">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{MARGIN_LEFT}" y="13" font-size="11" font-weight="bold">{escape(title)}</text>',
        f'<text x="{MARGIN_LEFT - 4}" y="{MARGIN_TOP + 8}" text-anchor="end">{_num(top)}{escape(unit)}</text>',
        f'<text x="{MARGIN_LEFT - 4}" y="{MARGIN_TOP + plot_h}" text-anchor="end">0</text>',
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP + plot_h}" x2="{WIDTH - 8}" y2="{MARGIN_TOP + plot_h}" '
        'stroke="#888"/>',
    ]
    for i, (label, value) in enumerate(bars):
        h = plot_h * max(value, 0) / top
        x = MARGIN_LEFT + i * step
        parts.append(
            f'<rect x="{x + step * 0.1:.1f}" y="{MARGIN_TOP + plot_h - h:.1f}" width="{max(step * 0.8, 1):.1f}" '
            f'height="{h:.1f}" fill="#4f6bed"><title>{escape(label)}: {_num(value)}{escape(unit)}</title></rect>'
        )
    if bars:
        y = HEIGHT - 8
        parts.append(f'<text x="{MARGIN_LEFT}" y="{y}">{escape(bars[0][0])}</text>')
        if len(bars) > 1:
            parts.append(f'<text x="{WIDTH - 8}" y="{y}" text-anchor="end">{escape(bars[-1][0])}</text>')
    else:
        parts.append(f'<text x="{MARGIN_LEFT + 8}" y="{MARGIN_TOP + plot_h / 2}">no data</text>')
    parts.append("</svg>")
    return "".join(parts)


def svg_markdown(svg: str, alt: str) -> str:
    """Markdown that shows the SVG inline (a base64 data URI: no file, no server)."""
    data = base64.b64encode(svg.encode()).decode()
    return f"![{escape(alt)}](data:image/svg+xml;base64,{data})"


def _num(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:,.2f}"

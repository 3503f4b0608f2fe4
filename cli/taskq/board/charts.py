"""Charts drawn on the server as SVG: no chart library, no script. Pure functions from series to geometry; the
template (``_chart.html``) only places the numbers computed here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from taskq.board.metrics import COUNTS, MINUTE_MS, QueueSeries

WIDTH = 480
HEIGHT = 110
PAD_LEFT = 44
PAD_BOTTOM = 18
# One colour class per line (board.css), in legend order.
CLASSES = ("c0", "c1", "c2", "c3", "c4", "c5")


@dataclass(frozen=True)
class Line:
    label: str
    css: str
    points: str  # "x,y x,y ..." in the chart's coordinates
    total: str  # what the legend shows beside the label


@dataclass(frozen=True)
class Chart:
    title: str
    lines: tuple[Line, ...]
    y_max: str
    x_labels: tuple[tuple[float, str], ...]  # (x, "hh:mm")
    empty: bool
    width: int = WIDTH
    height: int = HEIGHT
    pad_left: int = PAD_LEFT
    pad_bottom: int = PAD_BOTTOM


def scale(rows: Sequence[Sequence[float | None]]) -> float:
    """The top of the y axis: the largest value, at least 1 (an idle chart keeps a visible axis)."""
    top = max((v for row in rows for v in row if v is not None), default=0.0)
    return max(1.0, float(top))


def polyline(values: Sequence[float | None], top: float) -> str:
    """Points of a line over the plot area; a minute without a value breaks nothing (it is left out)."""
    plot_w, plot_h = WIDTH - PAD_LEFT, HEIGHT - PAD_BOTTOM
    step = plot_w / max(1, len(values) - 1)
    return " ".join(
        f"{PAD_LEFT + i * step:.1f},{plot_h - (v / top) * plot_h:.1f}" for i, v in enumerate(values) if v is not None
    )


def x_labels(start_ms: int, minutes: int) -> tuple[tuple[float, str], ...]:
    """A label every 15 minutes (UTC)."""
    plot_w = WIDTH - PAD_LEFT
    step = plot_w / max(1, minutes - 1)
    labels = []
    for i in range(0, minutes, 15):
        at = (start_ms + i * MINUTE_MS) // 1000
        labels.append((PAD_LEFT + i * step, f"{at // 3600 % 24:02d}:{at // 60 % 60:02d}"))
    return tuple(labels)


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def counts_chart(series: QueueSeries) -> Chart:
    """Created / claimed / succeeded / failed / shed / matched per minute: the lines this queue's functions emit."""
    names = [(metric, label) for metric, label in COUNTS if series.has_values(metric)]
    rows = [series.counts[metric] for metric, _ in names]
    top = scale(rows)
    lines = tuple(
        Line(label, CLASSES[i % len(CLASSES)], polyline(series.counts[metric], top), _number(series.total(metric) or 0))
        for i, (metric, label) in enumerate(names)
    )
    return Chart("per minute", lines, _number(top), x_labels(series.start_ms, series.minutes), not lines)


def timing_chart(series: QueueSeries, metric: str, title: str) -> Chart:
    """p50 and p95 of a per-task time (ms) per minute, shown in seconds."""
    values = series.timings.get(metric, [])
    p50 = [None if v is None else v[0] / 1000 for v in values]
    p95 = [None if v is None else v[1] / 1000 for v in values]
    top = scale([p50, p95])
    last = next((v for v in reversed(values) if v is not None), None)
    lines = ()
    if last is not None:
        lines = (
            Line("p50 s", "c0", polyline(p50, top), f"{last[0] / 1000:.1f}"),
            Line("p95 s", "c4", polyline(p95, top), f"{last[1] / 1000:.1f}"),
        )
    return Chart(title, lines, _number(top), x_labels(series.start_ms, series.minutes), not lines)

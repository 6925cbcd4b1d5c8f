"""Figures for the report, drawn with matplotlib's Agg backend and returned as base64 PNG (the report embeds
them, so report.html stands alone). Inputs are small lists already aggregated by Spark.

Every series stays visible: each has its own marker and line style (the same label gets the same style in
every panel), and series with identical values are drawn once under one label naming all of them
(``range/eager = sticky/eager``) instead of hiding each other. A figure with no data is not drawn: the
functions return None and the report says so in words. Figures are at most about 900 pixels wide.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import cycle
from typing import Any

import matplotlib
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINES = ("-", "--", "-.", ":")
WIDTH_IN = 9.6  # at DPI: about 860 pixels
DPI = 90


@dataclass(frozen=True, slots=True)
class Plot:
    title: str
    png: str  # base64


Series = Mapping[str, Sequence[tuple[float, float]]]  # label -> [(x, y)]


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A marker, a line style, a colour and a marker size per label, all distinct for up to 10 labels. Markers
    are hollow and shrink from one label to the next, so points that coincide show as nested shapes."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    out: dict[str, dict[str, Any]] = {}
    for i, (label, marker) in enumerate(zip(sorted(labels), cycle(MARKERS), strict=False)):
        colour = colours[i % len(colours)]
        out[label] = {
            "marker": marker,
            "linestyle": LINES[i % len(LINES)],
            "color": colour,
            "markerfacecolor": "none",
            "markeredgecolor": colour,
            "markersize": max(4.0, 11.0 - 1.2 * (i % 6)),
            "markeredgewidth": 1.4,
        }
    return out


def _key(points: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    return tuple(sorted((round(x, 9), float(f"{y:.6g}")) for x, y in points))


def merge_identical(panels: Mapping[str, Series]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """The panels with series that are identical in every panel drawn once, under one label naming all of them
    (``a = b``, names in sorted order); series differing in any panel keep their own label everywhere."""
    labels = sorted({label for series in panels.values() for label, points in series.items() if points})
    groups: dict[tuple[Any, ...], list[str]] = {}
    for label in labels:
        signature = tuple(_key(series.get(label, ())) for series in panels.values())
        groups.setdefault(signature, []).append(label)
    names = {members[0]: " = ".join(members) for members in groups.values()}
    return {
        panel: {names[label]: sorted(points) for label, points in series.items() if points and label in names}
        for panel, series in panels.items()
    }


def has_data(panels: Mapping[str, Series]) -> bool:
    return any(points for series in panels.values() for points in series.values())


def panels(
    title: str,
    panels: Mapping[str, Series],
    xlabel: str,
    ylabel: str,
    log_y: bool = False,
    columns: int = 2,
) -> Plot | None:
    """Small multiples: one panel per key of ``panels`` (a line per series over x, or bars when every series
    has a single x), one legend for all; None when there is nothing to draw."""
    drawn = merge_identical({name: series for name, series in panels.items() if any(series.values())})
    if not drawn:
        return None
    style = styles(sorted({label for series in drawn.values() for label in series}))
    columns = min(columns, len(drawn))
    rows = -(-len(drawn) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(WIDTH_IN, 3.1 * rows + 0.9), squeeze=False, constrained_layout=True
    )
    handles: dict[str, Any] = {}
    for ax, (name, series) in zip(axes.flat, drawn.items(), strict=False):
        xs = sorted({x for points in series.values() for x, _ in points})
        if len(xs) == 1:  # one group size: bars, one per series, labelled
            _bars(ax, series, style)
            ax.set_xlabel(ylabel, fontsize="small")
            ax.set_title(f"{name}\n{xlabel}: {xs[0]:g}", fontsize="medium")
        else:
            for label, points in series.items():
                (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], label=label, **style[label])
                handles.setdefault(label, line)
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel, fontsize="small")
            ax.set_title(name, fontsize="medium")
        if log_y:  # the values' axis: x for bars (horizontal), y for lines
            ax.set_xscale("log") if len(xs) == 1 else ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncol=1 if any(len(h) > 60 for h in handles) else 2,
            fontsize="small",
            frameon=False,
        )
    fig.suptitle(title, fontsize="large")
    return Plot(title, _png(fig))


def _bars(ax: Any, series: Mapping[str, Sequence[tuple[float, float]]], style: Mapping[str, Mapping[str, Any]]) -> None:
    """One horizontal bar per label, for panels whose series all have the same single x."""
    labels = list(series)
    ax.barh(
        range(len(labels)), [series[k][0][1] for k in labels], height=0.6, color=[style[k]["color"] for k in labels]
    )
    ax.set_ylim(len(labels) - 0.4, -0.6) if len(labels) > 1 else ax.set_ylim(1, -1)
    ax.set_yticks(range(len(labels)), [_wrap(label) for label in labels], fontsize="x-small")


def _wrap(label: str, width: int = 34) -> str:
    lines: list[str] = []
    for part in label.split(" = "):
        if lines and len(lines[-1]) + len(part) + 3 <= width:
            lines[-1] += " = " + part
        else:
            lines.append(part if not lines else "= " + part)
    return "\n".join(lines)


def bars(title: str, xlabel: str, values: Mapping[str, float]) -> Plot | None:
    """One horizontal bar per label (identical values keep their own bars: each is labelled); None when empty."""
    if not values:
        return None
    labels = sorted(values)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.35 * len(labels) + 1.2))
    colours = [styles(labels)[label]["color"] for label in labels]
    ax.barh(range(len(labels)), [values[k] for k in labels], color=colours)
    ax.set_yticks(range(len(labels)), labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    return Plot(title, _png(fig))

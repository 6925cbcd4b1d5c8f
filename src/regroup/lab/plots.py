"""Figures for the report, drawn with matplotlib's Agg backend and returned as base64 PNG (the report embeds
them, so report.html stands alone). Inputs are small lists already aggregated by Spark."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt


@dataclass(frozen=True, slots=True)
class Plot:
    title: str
    png: str  # base64


Series = Mapping[str, Sequence[tuple[float, float]]]  # label -> [(x, y)]


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def lines(title: str, xlabel: str, ylabel: str, series: Series, log_y: bool = False) -> Plot:
    """One line per label over x (sorted), markers on the points."""
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    for label in sorted(series):
        points = sorted(series[label])
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log_y:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize="small")
    return Plot(title, _png(fig))


def bars(title: str, ylabel: str, values: Mapping[str, float]) -> Plot:
    """One bar per label."""
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    labels = sorted(values)
    ax.bar(range(len(labels)), [values[k] for k in labels], color="#4a7ab5")
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize="small")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    return Plot(title, _png(fig))

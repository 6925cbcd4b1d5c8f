"""``regroup demo``: KIP-54's three worked examples (``assignors/examples.py``), round-robin and sticky side by
side."""

from __future__ import annotations

from collections.abc import Mapping

from regroup.assignors.examples import EXAMPLES, before_and_after, kept


def _cell(per_topic: Mapping[str, list[int]]) -> str:
    return ", ".join(f"{t}p{p}" for t in sorted(per_topic) for p in per_topic[t]) or "-"


def render(strategies: tuple[str, ...] = ("roundrobin", "sticky")) -> str:
    """The demo text."""
    lines: list[str] = []
    for ex in EXAMPLES:
        lines.append(ex.title)
        runs = {s: before_and_after(ex, s) for s in strategies}
        before = {s: run[0] for s, run in runs.items()}
        after = {s: run[1] for s, run in runs.items()}
        after_subs = ex.apply_change(dict(ex.subscriptions))
        width = 28
        header = f"  {'':9}" + "".join(f"{s:<{width}}" for s in strategies)
        for label, table, members in (
            ("before", before, sorted(ex.subscriptions)),
            (f"after: {ex.change}", after, sorted(after_subs)),
        ):
            lines.append(f"  {label}")
            lines.append(header)
            for m in members:
                lines.append(f"  {m:<9}" + "".join(f"{_cell(table[s].get(m, {})):<{width}}" for s in strategies))
        kept_text = "; ".join(f"{s} keeps {kept(before[s], after[s])}" for s in strategies)
        lines.append(f"  partitions kept through the change: {kept_text}")
        lines.append("")
    return "\n".join(lines)

"""Results that look wrong at first sight point to their explanation: ``regroup simulate``'s text for the bundled
third-member-joins scenarios names the section of docs/simulator.md that explains them, and its rebalance table
says when rebalances before the measurement window are left out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def simulate(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "regroup", "simulate", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("protocol", ["eager", "cooperative", "consumer"])
def test_the_third_member_scenarios_point_to_their_explanation(protocol: str) -> None:
    lines = simulate(f"third-member-joins-{protocol}")
    assert lines[-1] == (
        'why eager pauses less than cooperative and KIP-848 here: docs/simulator.md, "Findings and limits", '
        '"A third member joins"'
    )
    header = (
        "rebalances: (from 25000 ms, the scenario's measure_from_ms; those starting earlier, while the group formed, "
        "are left out)"
    )
    assert header in lines
    text = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8")
    assert "## Findings and limits" in text and "**A third member joins**" in text


def test_a_scenario_measured_from_the_start_has_a_plain_table_and_no_pointer() -> None:
    lines = simulate("rolling-upgrade")
    assert "rebalances:" in lines and not any(line.startswith("why ") for line in lines)

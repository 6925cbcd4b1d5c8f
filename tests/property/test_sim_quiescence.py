"""The simulator's per-step quiescence check is incremental (only members polled since the last step, or
whose consumer-group record was replaced, are examined again). At every step of seeded random schedules, its
answer must equal a check that examines every member afresh, made on the side."""

from __future__ import annotations

import pytest

from regroup.client.types import TopicPartition
from regroup.sim.engine import Simulator
from tests.property import test_sim_safety, test_sim_safety_kip848


class ComparingSimulator(Simulator):
    """Answers with the incremental check, and records every step where a full check disagrees."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.disagreements: list[str] = []
        self.quiescent_steps = 0

    def expected_if_quiescent(self) -> frozenset[TopicPartition] | None:
        incremental = super().expected_if_quiescent()
        # a full check on the side, leaving what the incremental check knows as it was
        kept = (self._classic_view, set(self._live), self._live_version, set(self._unsettled), dict(self._held))
        self.forget_quiescence()
        full = super().expected_if_quiescent()
        self._classic_view, self._live, self._live_version, self._unsettled, self._held = kept
        if incremental != full:
            self.disagreements.append(f"{self.now} ms: incremental {incremental}, full {full}")
        self.quiescent_steps += full is not None
        return incremental


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
@pytest.mark.parametrize("seed", range(8))
def test_incremental_quiescence_matches_a_full_check_classic(seed: int, cooperative: bool) -> None:
    sim = ComparingSimulator(test_sim_safety.random_scenario(seed, cooperative), seed)
    sim.run()
    assert sim.disagreements == []
    assert sim.quiescent_steps > 0  # the schedules do reach quiescence, so the comparison means something


@pytest.mark.parametrize("mixed", [False, True], ids=["consumer", "mixed"])
@pytest.mark.parametrize("seed", range(6))
def test_incremental_quiescence_matches_a_full_check_kip848(seed: int, mixed: bool) -> None:
    sim = ComparingSimulator(test_sim_safety_kip848.random_scenario(seed, mixed), seed)
    sim.run()
    assert sim.disagreements == []

"""The simulator's test for a stopped process (a tuple of both protocols' stopped states) agrees with the
states' own ``running``."""

from __future__ import annotations

import pytest

from regroup.client import ConsumerState, MemberState
from regroup.sim.engine import _STOPPED


@pytest.mark.parametrize("state", [*MemberState, *ConsumerState])
def test_stopped_states_are_the_states_not_running(state: MemberState | ConsumerState) -> None:
    assert (state in _STOPPED) is (not state.running)

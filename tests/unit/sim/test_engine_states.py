"""The simulator's test for a stopped process (by the identity of its state) agrees with the states' own
``running``."""

from __future__ import annotations

import pytest

from regroup.client import ClassicClientState, ConsumerClientState
from regroup.sim.engine import stopped


@pytest.mark.parametrize("state", [*ClassicClientState, *ConsumerClientState])
def test_stopped_states_are_the_states_not_running(state: ClassicClientState | ConsumerClientState) -> None:
    assert stopped(state) is (not state.running)

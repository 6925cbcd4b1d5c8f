"""The simulator's view of its group, learnt from the core's events alone (``sim/observed.py``), is the
coordinator's group: after every step of seeded random schedules (classic, KIP-848, and mixed ones whose
group converts both ways), the view's type, state, generation, members and, in a consumer group, each
member's epoch and assigned partitions equal the core's (read here, in a test, from the core's groups)."""

from __future__ import annotations

import pytest

from regroup.coordinator.consumer.group import to_set
from regroup.coordinator.events import GroupCreated, MemberAssignmentChanged, MemberJoined, MemberLeft
from regroup.sim.engine import Simulator
from regroup.sim.observed import ObservedGroup
from tests.group_views import classic_groups, consumer_groups
from tests.property import test_sim_safety, test_sim_safety_kip848


class CheckingSimulator(Simulator):
    """Compares the endpoint's view of the group with the coordinator's group after every step."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.mismatches: list[str] = []
        self.kinds: set[str] = set()

    def step(self, until_ms: int | None = None) -> bool:
        stepped = super().step(until_ms)
        mismatch = self._compare()
        if mismatch is not None:
            self.mismatches.append(f"{self.now} ms: {mismatch}")
        return stepped

    def _compare(self) -> str | None:
        view = self.endpoint.group
        self.kinds.add(view.kind)
        consumer = consumer_groups(self.coordinator).get(self.group_id)
        classic = classic_groups(self.coordinator).get(self.group_id)
        if consumer is not None:
            held = {m: (h.member_epoch, to_set(h.assigned)) for m, h in view.members.items()}
            core = {m: (c.member_epoch, dict(c.assigned)) for m, c in consumer.members.items()}
            seen = (view.kind, view.state, view.generation, list(held), held)
            want = ("consumer", consumer.state().value, consumer.group_epoch, list(core), core)
        elif classic is not None:
            seen = (view.kind, view.state, view.generation, set(view.members))
            want = ("classic", classic.state.value, classic.generation, set(classic.members))
        else:
            seen, want = (view.kind,), ("",)
        return None if seen == want else f"observed {seen}, coordinator {want}"


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
@pytest.mark.parametrize("seed", range(3))
def test_the_observed_classic_group_is_the_coordinators(seed: int, cooperative: bool) -> None:
    sim = CheckingSimulator(test_sim_safety.random_scenario(seed, cooperative), seed)
    sim.run()
    assert sim.mismatches == []
    assert "classic" in sim.kinds


@pytest.mark.parametrize("mixed", [False, True], ids=["consumer", "mixed"])
@pytest.mark.parametrize("seed", range(4))
def test_the_observed_consumer_group_is_the_coordinators(seed: int, mixed: bool) -> None:
    sim = CheckingSimulator(test_sim_safety_kip848.random_scenario(seed, mixed), seed)
    sim.run()
    assert sim.mismatches == []
    assert "consumer" in sim.kinds


def test_events_of_other_groups_and_types_are_not_followed() -> None:
    view = ObservedGroup("g")
    view.apply(GroupCreated("g", "share"))  # a share group under the same id is the share endpoint's
    assert (view.kind, view.apply(MemberJoined("g", "share", "s-1", "s", 1))) == ("", None)
    view.apply(GroupCreated("g", "consumer"))
    assert view.apply(MemberJoined("other", "consumer", "m-1", "c", 1)) is None
    assert view.apply(MemberJoined("g", "consumer", "m-1", "c", 1)) == "m-1"
    assert (view.members["m-1"].member_epoch, view.members["m-1"].assigned) == (0, ())  # nothing until assigned
    current = MemberAssignmentChanged("g", "m-1", "c", 1, "stable", (), ())
    assert view.apply(current) == "m-1" and view.members["m-1"] is current
    assert view.apply(MemberLeft("g", "consumer", "m-1", "c", 2, "leave")) == "m-1"
    assert view.members == {}

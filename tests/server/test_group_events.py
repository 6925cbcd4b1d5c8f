"""The events file's classic rebalance style (``server/events.py``, ``rebalance=`` in a ``group_state`` row),
learnt from the core's events alone: the assignors each member listed when it joined (``MemberJoined``), when
a rejoin listed others (``MemberProtocolsChanged``) and, after a restart, as the loaded groups stand. The
observer runs in process here, fed every result as the runtime feeds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from regroup.coordinator.events import GroupStateChanged
from regroup.coordinator.result import Result
from regroup.server.events import GroupEvents
from tests.coordinator.harness import GroupHarness

EAGER_OR_COOPERATIVE = (("cooperative-sticky", b"c"), ("range", b"r"))  # range is eager only: eager
COOPERATIVE = (("cooperative-sticky", b"c"),)


class ObservedHarness(GroupHarness):
    """Feeds every result to the events observer, as the coordinator runtime does."""

    def __init__(self, path: Path, **overrides: Any) -> None:
        super().__init__(**overrides)
        self.observer = GroupEvents(path)

    def _collect(self, result: Result) -> Result:
        self.observer(self.coordinator, result, self.now_ms)
        return super()._collect(result)


def styles(path: Path) -> list[tuple[str, str | None]]:
    """(state, rebalance style or None) of each ``group_state`` row."""
    out: list[tuple[str, str | None]] = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["type"] == "group_state":
            fields = dict(part.split("=", 1) for part in row["detail"].split())
            out.append((row["state"], fields.get("rebalance")))
    return out


def test_the_rebalance_style_follows_the_assignors_the_members_list(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    h = ObservedHarness(path)
    formed = h.form_group(2, protocols=[EAGER_OR_COOPERATIVE, EAGER_OR_COOPERATIVE])
    a, b = formed.members
    # one member rejoins listing cooperative-sticky only: the members no longer agree
    h.join(a, protocols=COOPERATIVE)
    h.join(b)
    h.sync_all()
    # the other does too: cooperative
    h.join(b, protocols=COOPERATIVE)
    h.join(a)
    h.sync_all()
    h.observer.close()
    rows = styles(path)
    assert rows[:2] == [("Empty", None), ("PreparingRebalance", "eager")]  # (created empty: no members yet)
    assert rows[-6:] == [
        ("PreparingRebalance", None),
        ("CompletingRebalance", None),
        ("Stable", None),
        ("PreparingRebalance", "cooperative"),
        ("CompletingRebalance", "cooperative"),
        ("Stable", "cooperative"),
    ]


def test_the_members_who_disagree_leaving_makes_the_rest_agree(tmp_path: Path) -> None:
    """Three members, one listing cooperative-sticky only: no style; once it leaves, the two left agree (eager);
    once both rejoined listing what it listed, cooperative."""
    path = tmp_path / "events.jsonl"
    h = ObservedHarness(path)
    formed = h.form_group(3, protocols=[EAGER_OR_COOPERATIVE, COOPERATIVE, EAGER_OR_COOPERATIVE])
    a, odd, c = formed.members
    h.leave(odd)
    h.rejoin_all()
    h.sync_all()
    assert styles(path)[-6:] == [
        ("PreparingRebalance", None),
        ("CompletingRebalance", None),
        ("Stable", None),
        ("PreparingRebalance", "eager"),
        ("CompletingRebalance", "eager"),
        ("Stable", "eager"),
    ]
    h.join(a, protocols=COOPERATIVE)
    h.join(c, protocols=COOPERATIVE)
    h.sync_all()
    h.observer.close()
    assert styles(path)[-3:] == [
        ("PreparingRebalance", None),  # (the first to rejoin lists cooperative-sticky only, the other not yet)
        ("CompletingRebalance", "cooperative"),
        ("Stable", "cooperative"),
    ]


def test_a_restarted_server_knows_the_loaded_members_assignors(tmp_path: Path) -> None:
    h = GroupHarness()
    h.form_group(2, protocols=[COOPERATIVE, COOPERATIVE])
    h.reload()
    path = tmp_path / "events.jsonl"
    observer = GroupEvents(path)
    observer(h.coordinator, Result(), h.now_ms)  # the first call writes the groups as loaded
    observer.close()
    assert styles(path) == [("Stable", "cooperative")]


def test_a_share_group_s_state_rows_say_share(tmp_path: Path) -> None:
    """Groups with epochs and a server-side assignor each name their own type in the events file: a share
    group's rows say ``type=share`` with its ``simple`` assignor, a consumer group's ``type=consumer``."""
    path = tmp_path / "events.jsonl"
    observer = GroupEvents(path)
    result = Result()
    for group_type, assignor in (("share", "simple"), ("consumer", "uniform")):
        result.events.append(
            GroupStateChanged(f"g-{group_type}", group_type, "Stable", 3, assignor, None, None, 3, 2)  # type: ignore[arg-type]
        )
    observer(GroupHarness().coordinator, result, 1_000)
    observer.close()
    details = [json.loads(line)["detail"] for line in path.read_text().splitlines()]
    assert details == [
        "group=g-share type=share protocol=simple assignment_epoch=3",
        "group=g-consumer type=consumer protocol=uniform assignment_epoch=3",
    ]

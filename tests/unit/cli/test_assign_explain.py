"""``regroup assign --explain``: each reason a partition moves for, exactly, on small groups."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.cli.assign_explain import explain


def explained(strategy: str, doc: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "regroup", "assign", "--strategy", strategy, "--explain"],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def move(topic: str, partition: int, before: str | None, after: str | None, reason: str) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "from": before, "to": after, "reason": reason}


def tally(lost: int = 0, balance: int = 0, rack: int = 0) -> dict[str, int]:
    return {"lost owner": lost, "balance": balance, "rack": rack}


def test_a_joiner_takes_partitions_for_balance() -> None:
    doc = {
        "topics": {"t": 4},
        "members": {"a": {"topics": ["t"], "owned": {"t": [0, 1, 2, 3]}, "generation": 1}, "b": {"topics": ["t"]}},
    }
    out = explained("sticky", doc)
    assert out["assignment"] == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
    assert out["explain"] == {
        "moved": [move("t", 2, "a", "b", "balance"), move("t", 3, "a", "b", "balance")],
        "reasons": tally(balance=2),
    }


def test_partitions_of_a_member_that_left_lost_their_owner() -> None:
    # c owned t-4 and t-5 and left: nobody in the input owns them
    doc = {
        "topics": {"t": 6},
        "members": {
            "a": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 3},
            "b": {"topics": ["t"], "owned": {"t": [2, 3]}, "generation": 3},
        },
    }
    out = explained("sticky", doc)
    assert out["assignment"] == {"a": {"t": [0, 1, 4]}, "b": {"t": [2, 3, 5]}}
    assert out["explain"] == {
        "moved": [move("t", 4, None, "a", "lost owner"), move("t", 5, None, "b", "lost owner")],
        "reasons": tally(lost=2),
    }
    assert out["metrics"]["partitions_moved"] == 0  # previous ownerships of the members still here: all kept


def test_a_member_that_no_longer_subscribes_loses_its_partitions() -> None:
    doc = {
        "topics": {"t": 2, "u": 2},
        "members": {
            "a": {"topics": ["u"], "owned": {"t": [0, 1], "u": [0]}, "generation": 1},
            "b": {"topics": ["t", "u"], "owned": {"u": [1]}, "generation": 1},
        },
    }
    out = explained("sticky", doc)
    assert out["assignment"] == {"a": {"u": [0, 1]}, "b": {"t": [0, 1]}}
    assert out["explain"] == {
        "moved": [
            move("t", 0, "a", "b", "lost owner"),
            move("t", 1, "a", "b", "lost owner"),
            move("u", 1, "b", "a", "balance"),  # b takes t, so a takes u-1 to even out the counts
        ],
        "reasons": tally(lost=2, balance=1),
    }


RACKS = {
    "topics": {"t": 4},
    "members": {
        "a": {"topics": ["t"], "owned": {"t": [2, 3]}, "generation": 1, "rack": "r1"},
        "b": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 1, "rack": "r2"},
    },
    "partition_racks": {"t": [["r1"], ["r1"], ["r2"], ["r2"]]},
}


def test_partitions_move_to_a_member_on_a_replica_rack() -> None:
    out = explained("sticky", RACKS)  # KIP-881: rack-aware when racks differ per partition
    assert out["assignment"] == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
    assert out["explain"] == {
        "moved": [
            move("t", 0, "b", "a", "rack"),
            move("t", 1, "b", "a", "rack"),
            move("t", 2, "a", "b", "rack"),
            move("t", 3, "a", "b", "rack"),
        ],
        "reasons": tally(rack=4),
    }


def test_a_partition_revoked_for_a_replica_rack_is_rack_before_it_has_a_new_owner() -> None:
    out = explained("cooperative-sticky", RACKS)  # revoked first, handed out in the next rebalance
    assert out["assignment"] == {"a": {}, "b": {}}
    assert out["explain"]["moved"] == [
        move("t", 0, "b", None, "rack"),
        move("t", 1, "b", None, "rack"),
        move("t", 2, "a", None, "rack"),
        move("t", 3, "a", None, "rack"),
    ]


def spec(members: dict[str, MemberSubscription], **topics: int) -> GroupSpec:
    return GroupSpec(topics=topics, members=members, partition_racks={"t": (frozenset({"r1"}),) * 3})


def test_the_rules_one_by_one() -> None:
    members = {
        "a": MemberSubscription.of(["t"], {"t": [0]}, generation=2, rack="r2"),
        "b": MemberSubscription.of(["t"], {"t": [0, 1]}, generation=1, rack="r1"),  # stale claim on t-0
        "c": MemberSubscription.of(["t"], {"t": [2]}, generation=2, rack="r2"),
        "d": MemberSubscription.of(["t"], {"t": [2]}, generation=2, rack="r3"),  # same generation as c
    }
    # t-0: previous owner a (highest generation), now b on the replica rack r1: rack
    # t-1: b kept it; t-2: a and d disagree in the same generation: no previous owner
    out = explain(spec(members, t=3), {"a": {}, "b": {"t": [0, 1]}, "c": {}, "d": {"t": [2]}})
    assert out == {
        "moved": [move("t", 0, "a", "b", "rack"), move("t", 2, None, "d", "lost owner")],
        "reasons": tally(lost=1, rack=1),
    }
    # to a member off the replica racks: balance; a replica-rack owner moving: balance
    out = explain(spec(members, t=3), {"a": {}, "b": {"t": [1, 2]}, "c": {"t": [0]}, "d": {}})
    assert out["moved"] == [move("t", 0, "a", "c", "balance"), move("t", 2, None, "b", "lost owner")]
    out = explain(spec(members, t=3), {"a": {"t": [1]}, "b": {"t": [0]}, "c": {}, "d": {"t": [2]}})
    assert out["moved"] == [
        move("t", 0, "a", "b", "rack"),
        move("t", 1, "b", "a", "balance"),
        move("t", 2, None, "d", "lost owner"),
    ]


def test_a_fresh_group_has_nothing_to_explain() -> None:
    doc = {"topics": {"t": 3}, "members": {"a": {"topics": ["t"]}, "b": {"topics": ["t"]}}}
    assert explained("range", doc)["explain"] == {"moved": [], "reasons": tally()}


def test_several_owners_of_a_partition_are_refused() -> None:
    doc = {
        "topics": {"t": 2},
        "members": {"a": {"topics": ["t"], "owned": {"t": [0]}}, "b": {"topics": ["t"], "owned": {"t": [1]}}},
        "options": {"replicas": 2},
    }
    proc = subprocess.run(
        [sys.executable, "-m", "regroup", "assign", "--strategy", "redundant", "--explain"],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "regroup: --explain: t-0 has several owners; moves are told for one owner\n"

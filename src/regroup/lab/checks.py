"""Published figures reproduced as lab checks (shown in every report, asserted by the tests):

* KIP-54: through each worked example's membership change, how many partitions keep their
  owner under round-robin and under sticky (example 1: sticky keeps 5 where round-robin keeps 3). The
  examples are ``regroup.assignors.examples.EXAMPLES``, computed by the real assignors.
* The payload arithmetic behind Kafka's leader-only JoinGroup: 100 members × 100 KB of metadata → 10 MB per
  JoinGroup response and 1 GB per rebalance if every member received everyone's metadata, beside the
  leader-only figure (10 MB), computed by ``payload.join_bytes``, the function the metrics use.
"""

from __future__ import annotations

from dataclasses import dataclass

from regroup.assignors.examples import EXAMPLES, kept_through_change
from regroup.lab.payload import join_bytes

KIP54_EXPECTED = {0: {"roundrobin": 3, "sticky": 5}}  # example 1, as the KIP states it
PAYLOAD_MEMBERS = 100
PAYLOAD_METADATA_BYTES = 100_000  # 100 KB per member
PAYLOAD_RESPONSE_BYTES = 10_000_000  # 10 MB per JoinGroup response carrying everyone's metadata
PAYLOAD_REBALANCE_BYTES = 1_000_000_000  # 1 GB per rebalance if every member received it


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    expected: str
    measured: str
    ok: bool


@dataclass(frozen=True, slots=True)
class Kip54Row:
    example: str
    change: str
    roundrobin: int
    sticky: int


def kip54_rows() -> list[Kip54Row]:
    return [
        Kip54Row(ex.title, ex.change, kept_through_change(ex, "roundrobin"), kept_through_change(ex, "sticky"))
        for ex in EXAMPLES
    ]


def payload_arithmetic() -> tuple[int, int, int]:
    """(bytes of one JoinGroup response carrying everyone's metadata, total when everyone receives it,
    total when only the leader does) for 100 members × 100 KB."""
    leader_only, everyone = join_bytes([PAYLOAD_METADATA_BYTES] * PAYLOAD_MEMBERS)
    per_response = everyone // PAYLOAD_MEMBERS
    return per_response, everyone, leader_only


def run_all() -> list[Check]:
    rows = kip54_rows()
    out: list[Check] = []
    for index, expected in KIP54_EXPECTED.items():
        got = {"roundrobin": rows[index].roundrobin, "sticky": rows[index].sticky}
        out.append(
            Check(
                f"KIP-54 example {index + 1}: partitions kept through '{rows[index].change}'",
                f"sticky {expected['sticky']}, round-robin {expected['roundrobin']}",
                f"sticky {got['sticky']}, round-robin {got['roundrobin']}",
                got == expected,
            )
        )
    per_response, everyone, leader_only = payload_arithmetic()
    out.append(
        Check(
            "one JoinGroup response carrying every member's metadata: 100 members × 100 KB",
            "10 MB",
            f"{per_response / 1e6:g} MB",
            per_response == PAYLOAD_RESPONSE_BYTES,
        )
    )
    out.append(
        Check(
            "one rebalance if every member received everyone's metadata",
            "1 GB",
            f"{everyone / 1e9:g} GB",
            everyone == PAYLOAD_REBALANCE_BYTES,
        )
    )
    out.append(
        Check(
            "one rebalance in Kafka (only the leader receives the metadata)",
            "10 MB (linear in the group size)",
            f"{leader_only / 1e6:g} MB",
            leader_only == PAYLOAD_RESPONSE_BYTES,
        )
    )
    return out

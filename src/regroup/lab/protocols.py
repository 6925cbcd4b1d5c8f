"""Rebalance protocols a grid can name, and how a run asks the simulator for one.

``eager`` and ``cooperative`` are the classic protocol's two rebalance styles. The simulator's members pick
the style from ``partition.assignment.strategy`` the way Kafka's client does (the highest protocol every
listed assignor supports), so the lab chooses the list: ``[s]`` when ``s`` alone gives the wanted style;
for ``eager`` with an assignor that also supports cooperative, ``[s, "range"]`` (Kafka's own recipe:
``s`` is still the one the group votes for, ``range`` keeps the style eager).

Server-side (KIP-848) assignors never run under a classic protocol: such a pair is skipped.

Any other name (``consumer``, KIP-848) is passed through to the simulator as the members' ``protocol``
field, with the grid's strategy as their server-side ``assignor``; a run names that assignor by regroup's name
(``strategy_name``: ``range`` under ``consumer`` is ``server-range``). Whether that runs is the simulator's
scenario layer's call: a one-member probe scenario is parsed with those fields, so a protocol (or a server
assignor) the simulator learns becomes usable here without a change to the lab, and one it does not know
is a grid error naming it.

``share`` (KIP-932 share consumers) has no assignor to choose: the share group's coordinator assigns with its
``simple`` assignor, so every strategy of a grid runs as ``simple`` under ``share`` (the first listed runs, the
others are the same pair again), and the members get ``protocol: share`` alone.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from regroup.assignors import registry
from regroup.assignors.spec import RebalanceProtocol
from regroup.client.config import ConfigError, rebalance_protocol
from regroup.sim.scenario import ScenarioError, parse

CLASSIC = {"eager": RebalanceProtocol.EAGER, "cooperative": RebalanceProtocol.COOPERATIVE}
#: Names probed beyond the classic two (KIP-848's ``group.protocol=consumer``).
CANDIDATES = ("consumer", "share")
FALLBACK_STRATEGY = "range"
#: KIP-932 share consumers, and the one assignor their group has
SHARE = "share"
SHARE_ASSIGNOR = "simple"


def strategy_name(protocol: str, strategy: str) -> str:
    """The strategy a run under ``protocol`` uses, by regroup's name: a server-side assignor's alias (Kafka's
    ``range``) under a protocol other than the classic ones is its regroup name (``server-range``)."""
    if protocol in CLASSIC:
        return strategy
    if protocol == SHARE:
        return SHARE_ASSIGNOR
    return registry.server_side_name(strategy) or strategy


def member_settings(protocol: str, strategy: str) -> dict[str, Any] | None:
    """Member fields that make ``strategy`` run under ``protocol``, or None if it cannot."""
    if protocol == SHARE:
        return {"protocol": SHARE} if _accepted((("protocol", SHARE),)) else None
    if protocol not in CLASSIC:
        settings = {"protocol": protocol, "assignor": strategy_name(protocol, strategy)}
        return dict(settings) if _accepted(tuple(sorted(settings.items()))) else None
    if registry.get(strategy).server_side:
        return None  # KIP-848's server-side assignors have no classic protocol
    wanted = CLASSIC[protocol]
    for strategies in ((strategy,), (strategy, FALLBACK_STRATEGY)):
        if len(set(strategies)) != len(strategies):
            continue
        try:
            if rebalance_protocol(strategies) == wanted:
                return {"strategies": list(strategies)}
        except ConfigError:
            return None
    return None


@cache
def _accepted(settings: tuple[tuple[str, str], ...]) -> bool:
    """Does the simulator's scenario parser accept members with these fields?"""
    probe = {
        "duration_ms": 1,
        "topics": {"t": 1},
        "member_defaults": dict(settings),
        "members": [{"id": "c0"}],
        "events": [],
    }
    try:
        parse(json.dumps(probe), "<protocol probe>")
    except ScenarioError:
        return False
    return True


def is_supported(protocol: str) -> bool:
    return protocol in CLASSIC or _accepted((("protocol", protocol),))


def supported() -> tuple[str, ...]:
    """Every protocol name the simulator runs today."""
    return (*CLASSIC, *(p for p in CANDIDATES if is_supported(p)))

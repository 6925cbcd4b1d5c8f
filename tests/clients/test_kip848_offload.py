"""KIP-848 consumers (confluent-kafka, ``group.protocol=consumer``) in a group whose target ``regroup serve``
computes on its worker thread (``--consumer-assignor-offload-members 2``): members join onto two topics with
different subscriptions (a full computation every time), leave and come back, and the group settles each time
with every partition owned by one member at a time; the server's metrics count the work done aside. With
offloading switched off the same history settles the same way and counts none, and so it does with an
assignment interval."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.clients.harness import Inspector, eventually
from tests.clients.kip848 import HOLD_S, SERVER_ARGS, Book, Owner, aside_count, server_view, stopped_at_exit
from tests.server.conftest import free_port, served

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 6


@pytest.mark.parametrize(
    ("offload", "interval_ms"), [(True, 0), (False, 0), (False, 1_000)], ids=["offloaded", "within", "batched"]
)
def test_members_settle_with_the_target_computed_aside(tmp_path: Path, offload: bool, interval_ms: int) -> None:
    """``batched``: within, with an assignment interval of a second (KIP-1263, Kafka 4.3's default): the members'
    changes are taken together, and the group settles all the same."""
    metrics_port = free_port()
    flags = ["--consumer-assignor-offload-members", "2"] if offload else ["--no-consumer-assignor-offload"]
    flags += ["--consumer-assignment-interval-ms", str(interval_ms)]
    with served(tmp_path, *SERVER_ARGS, *flags, "--metrics-port", str(metrics_port)) as server:
        port, group = server.port, "offload"
        bootstrap = f"127.0.0.1:{port}"
        Inspector(bootstrap, "left", PARTITIONS).create_topic()
        Inspector(bootstrap, "right", PARTITIONS).create_topic()
        books = {"left": Book(), "right": Book()}  # (a book numbers the partitions of one topic)
        running: dict[str, list[Owner]] = {"left": [], "right": []}
        everyone: list[Owner] = []

        def start(name: str, topic: str) -> Owner:
            member = Owner(books[topic], bootstrap, topic, group, name, assignor="range")
            running[topic].append(member)
            everyone.append(member)
            member.start()
            return member

        def settle() -> None:
            """Stable, each topic's partitions owned once, by its own subscribers only, as they say, held for a
            while."""
            held: list[tuple[float, object]] = []
            last: list[object] = []

            def settled() -> bool | None:
                for m in everyone:
                    assert m.error is None and m.fatal is None, (m.member, m.error, m.fatal)
                views = {topic: server_view(port, group, topic) for topic in running}
                last[:] = [views, {m.member: m.owned for m in everyone}]
                names = {m.member for members in running.values() for m in members}
                key = []
                for topic, members in running.items():
                    view = views[topic]
                    if view.state != "Stable" or set(view.assignments) != names:
                        return None
                    mine = {m.member: m.owned for m in members}
                    theirs = {n: a for n, a in view.assignments.items() if a}
                    if not theirs.keys() <= mine.keys() or any(view.assignments[n] != mine[n] for n in mine):
                        return None
                    owned = sorted(p for a in theirs.values() for p in a)
                    if owned != (list(range(PARTITIONS)) if members else []):
                        return None
                    key.append(sorted((n, sorted(a)) for n, a in theirs.items()))
                if not held or held[0][1] != key:
                    held[:] = [(time.monotonic(), key)]
                    return None
                return True if time.monotonic() - held[0][0] >= HOLD_S else None

            try:
                eventually(settled, 45, f"group {group} to settle")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; last (server, members) = {last}") from None

        with stopped_at_exit(everyone):
            start("l0", "left")
            settle()
            start("r0", "right")
            start("l1", "left")
            settle()
            start("r1", "right")
            settle()
            leaving = running["left"].pop(0)
            leaving.stop()
            settle()
            start("l2", "left")
            settle()
            for members in running.values():
                for member in members:
                    member.stop()
        assert books["left"].exclusive_violations() == [] and books["right"].exclusive_violations() == []
        counted = aside_count(metrics_port)
        assert counted >= 3 if offload else counted == 0, counted

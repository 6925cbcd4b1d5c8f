"""regroup's own server-side assignors chosen by KIP-848 clients with ``group.remote.assignor``, against
``regroup serve --consumer-assignors uniform,range,optimal,consistent-hash``: confluent-kafka (librdkafka,
``group.protocol=consumer``) and Kafka's Java consumer (``../shared/java``, 4.0-SNAPSHOT; skipped where it or a
JDK is absent). Every partition is owned by exactly one member; ``optimal`` is balanced and sticky."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.harness import Inspector, eventually
from tests.clients.java_tools import java_program
from tests.clients.kip848 import SERVER_ARGS, Book, Owner, ServerView, server_view, stopped_at_exit, wait_settled
from tests.server.conftest import ServerProcess, served

pytestmark = pytest.mark.timeout(180)

OFFERED = "uniform,range,optimal,consistent-hash"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with served(tmp_path, *SERVER_ARGS, "--consumer-assignors", OFFERED) as proc:
        yield proc


def test_confluent_kafka_members_on_optimal(server: ServerProcess) -> None:
    """Three members naming ``optimal`` split 6 partitions 2/2/2, each partition owned once; when one leaves,
    the two others keep what they had and take one of its partitions each."""
    port, topic, group, partitions = server.port, "remote-optimal", "remote-optimal", 6
    Inspector(f"127.0.0.1:{port}", topic, partitions).create_topic()
    book = Book()
    members = [Owner(book, f"127.0.0.1:{port}", topic, group, name, assignor="optimal") for name in ("o1", "o2", "o3")]
    with stopped_at_exit(members):
        for m in members:
            m.start()
        three = wait_settled(port, group, topic, partitions, members)
        assert three.assignor == "optimal"
        assert sorted(len(ps) for ps in three.assignments.values()) == [2, 2, 2]
        gone = members.pop()
        gone.stop()
        two = wait_settled(port, group, topic, partitions, members)
        assert sorted(len(ps) for ps in two.assignments.values()) == [3, 3]
        for m in members:
            assert three.assignments[m.member] < two.assignments[m.member], (three, two)
    assert not book.exclusive_violations(), book.exclusive_violations()


def test_confluent_kafka_members_on_consistent_hash(server: ServerProcess) -> None:
    """Two members naming ``consistent-hash``: every partition owned once (the ring promises no balance)."""
    port, topic, group, partitions = server.port, "remote-ring", "remote-ring", 8
    Inspector(f"127.0.0.1:{port}", topic, partitions).create_topic()
    book = Book()
    members = [
        Owner(book, f"127.0.0.1:{port}", topic, group, name, assignor="consistent-hash") for name in ("h1", "h2")
    ]
    with stopped_at_exit(members):
        for m in members:
            m.start()
        view = wait_settled(port, group, topic, partitions, members)
    assert view.assignor == "consistent-hash"


# ------------------------------------------------------------------------------------------ Java consumer


@pytest.fixture(scope="module")
def java_member(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    source = Path(__file__).with_name("java") / "RemoteAssignorMember.java"
    return [*java_program(source, tmp_path_factory.mktemp("java")), "RemoteAssignorMember"]


def _settled(port: int, group: str, topic: str, partitions: int, names: set[str]) -> ServerView | None:
    view = server_view(port, group, topic)
    owned = sorted(p for ps in view.assignments.values() for p in ps)
    if view.state != "Stable" or set(view.assignments) != names or owned != list(range(partitions)):
        return None
    return view if all(view.targets.get(n) == view.assignments[n] for n in names) else None


def test_java_consumers_on_optimal(server: ServerProcess, java_member: list[str], tmp_path: Path) -> None:
    """Kafka's Java consumer sends ``group.remote.assignor=optimal``: two members split 4 partitions 2/2,
    each owned once, and each member's own view is the server's."""
    port, topic, group, partitions = server.port, "remote-java", "remote-java", 4
    bootstrap = f"127.0.0.1:{port}"
    Inspector(bootstrap, topic, partitions).create_topic()
    procs: dict[str, subprocess.Popen[str]] = {}
    logs = {name: tmp_path / f"{name}.out" for name in ("j1", "j2")}
    try:
        for name, log in logs.items():
            with log.open("w") as sink:
                procs[name] = subprocess.Popen(
                    [*java_member, bootstrap, topic, group, "optimal", name],
                    stdin=subprocess.PIPE,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
        view = eventually(lambda: _settled(port, group, topic, partitions, set(procs)), 90, "the Java group to settle")
        assert view.assignor == "optimal"
        assert sorted(len(ps) for ps in view.assignments.values()) == [2, 2]

        def agrees() -> bool | None:
            for name, log in logs.items():
                lines = [line for line in log.read_text().splitlines() if line.startswith(("assigned", "error"))]
                want = "assigned " + ",".join(str(p) for p in sorted(view.assignments[name]))
                if not lines or lines[-1] != want:
                    return None
            return True

        eventually(agrees, 30, "each Java member to report the server's assignment")
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()  # the member closes its consumer and exits
        deadline = time.monotonic() + 30
        for proc in procs.values():
            try:
                proc.wait(max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    outputs = {name: log.read_text() for name, log in logs.items()}
    assert not any("error " in text for text in outputs.values()), outputs

"""Large CreateTopics (and DeleteTopics) requests against a real ``regroup serve``: checked in one step with the
answers a small request gets, their names reserved, the directories written in chunks off the event loop and
registered chunk by chunk (``server/handlers/topics.py``, ``server/topics.py``).

What is checked: every topic of a 2,000-topic request is created, shown by Metadata and kept over a restart; a
CreateTopics of the same names from another connection while the big one is in flight gets
TOPIC_ALREADY_EXISTS for each, and Metadata never creates a reserved name a second time; refusals inside a
large request are those of a small one; a server stopped (SIGTERM) in the middle of one starts again with whole
topics only; and the stall watchdog counts no CreateTopics or DeleteTopics stall for such requests."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, free_port
from tests.server.test_metrics import scrape, value
from tests.server.wire import CREATE_TOPICS, TOPIC_ALREADY_EXISTS, WireClient, create_topics

MakeServer = Callable[..., ServerProcess]
METADATA, DELETE_TOPICS = 3, 20
NO_ID = uuid.UUID(int=0)
BIG = 2_000
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 3, 5
TIMEOUT_S = 120.0


def topic(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def send_create(client: WireClient, topics: list[dict[str, Any]], validate_only: bool = False) -> int:
    return client.send(CREATE_TOPICS, 7, topics=topics, timeout=60_000, validate_only=validate_only)


def create(client: WireClient, topics: list[dict[str, Any]], validate_only: bool = False) -> dict[str, Any]:
    """CreateTopics v7 of ``topics``: each name's result (names of a request are distinct here but for
    duplicates, whose results are alike)."""
    send_create(client, topics, validate_only)
    return {t.name: t for t in client.receive().topics}


def metadata(client: WireClient, names: list[str] | None, auto: bool = False) -> dict[str, Any]:
    wanted = None if names is None else [{"name": n, "topic_id": NO_ID} for n in names]
    answer = client.call(
        METADATA, 12, topics=wanted, allow_auto_topic_creation=auto, include_topic_authorized_operations=False
    )
    return {t.name: t for t in answer.topics}


def names_of(prefix: str, count: int = BIG) -> list[str]:
    return [f"{prefix}-{i:05d}" for i in range(count)]


def test_a_large_create_topics_creates_every_topic_durably(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    names = names_of("big")
    with WireClient(server.port, timeout=TIMEOUT_S) as client:
        results = create(client, [topic(n) for n in names])
        assert sorted(results) == names
        assert {r.error_code for r in results.values()} == {0}
        assert {(r.num_partitions, r.replication_factor) for r in results.values()} == {(1, 1)}
        ids = {n: r.topic_id for n, r in results.items()}
        assert NO_ID not in ids.values() and len(set(ids.values())) == BIG
        assert {len(r.configs) for r in results.values()} == {len(results[names[0]].configs)} != {0}
        shown = metadata(client, None)
        assert {n: (t.error_code, t.topic_id, len(t.partitions)) for n, t in shown.items() if n in ids} == {
            n: (0, ids[n], 1) for n in names
        }
    server.restart()
    with WireClient(server.port, timeout=TIMEOUT_S) as client:
        shown = metadata(client, None)
        assert {n: t.topic_id for n, t in shown.items() if n.startswith("big-")} == ids
        again = create(client, [topic(n) for n in names[:40]])  # still there: refused as existing
        assert {r.error_code for r in again.values()} == {TOPIC_ALREADY_EXISTS}


def test_names_in_flight_are_taken_for_other_connections_and_invisible(make_server: MakeServer) -> None:
    """Another connection's CreateTopics of names the big request is creating gets TOPIC_ALREADY_EXISTS for
    each (in flight or done, never a second creation); Metadata does not show them before they are created, nor
    auto-creates them."""
    server = make_server("--fsync", "never")
    names = names_of("race")
    late = names[-60:]  # in the last chunk: still reserved, not created, when the first chunk shows
    with WireClient(server.port, timeout=TIMEOUT_S) as big, WireClient(server.port, timeout=TIMEOUT_S) as other:
        send_create(big, [topic(n) for n in names])
        deadline = time.monotonic() + TIMEOUT_S
        while metadata(other, [names[0]])[names[0]].error_code != 0:  # the big request is in flight
            assert time.monotonic() < deadline, "the first chunk never showed"
        seen = metadata(other, late[:5], auto=True)  # (auto-creation: a reserved name is not created again)
        assert {t.error_code for t in seen.values()} <= {0, LEADER_NOT_AVAILABLE}
        unseen = metadata(other, late[5:10])
        assert {t.error_code for t in unseen.values()} <= {0, UNKNOWN_TOPIC_OR_PARTITION}
        small = create(other, [topic(n) for n in late[:10]])  # a small request (one step)
        large = create(other, [topic(n, partitions=2) for n in late[10:]])  # a large one (chunked)
        for results in (small, large):
            assert {r.error_code for r in results.values()} == {TOPIC_ALREADY_EXISTS}
            assert all(r.error_message == f"Topic '{n}' already exists." for n, r in results.items())
        done = {t.name: t for t in big.receive().topics}
        assert {r.error_code for r in done.values()} == {0}
        shown = metadata(other, None)
        assert {n: (t.topic_id, len(t.partitions)) for n, t in shown.items() if n.startswith("race-")} == {
            n: (done[n].topic_id, 1) for n in names
        }
    server.restart()  # one directory per name: the store opens
    with WireClient(server.port, timeout=TIMEOUT_S) as client:
        assert {n: t.topic_id for n, t in metadata(client, None).items() if n.startswith("race-")} == {
            n: done[n].topic_id for n in names
        }


#: entries whose refusals must not depend on the request's size: (name, topic fields) — a duplicate, an
#: illegal name, an unknown config, a bad value, no partitions, a replication factor above one, an existing
#: topic, a name colliding with one once '.' and '_' are alike
REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("dup", {}),
    ("dup", {}),
    ("bad name!", {}),
    ("{p}-cfg", {"configs": {"no.such.config": "1"}}),
    ("{p}-value", {"configs": {"retention.ms": "soon"}}),
    ("{p}-zero", {"partitions": 0}),
    ("{p}-rf", {"rf": 3}),
    ("existing", {}),
    ("with.dot", {}),
]


def refused_entries(prefix: str) -> list[dict[str, Any]]:
    out = []
    for name, fields in REFUSED:
        name = name.replace("{p}", prefix).replace("with.dot", "with_dot")
        out.append(topic(name, fields.get("partitions", 1), fields.get("rf", 1), fields.get("configs")))
    return out


@pytest.mark.parametrize("validate_only", [False, True])
def test_a_large_request_refuses_what_a_small_one_refuses(make_server: MakeServer, validate_only: bool) -> None:
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=TIMEOUT_S) as client:
        create_topics(client, {"existing": 1, "with.dot": 1})
        override = {"retention.ms": "1000", "cleanup.policy": "compact"}
        small = create(client, [*refused_entries("s"), topic("s-ok", 3, configs=override)], validate_only)
        padding = [topic(n) for n in names_of("pad", 300)]
        large = create(
            client, [*padding[:150], *refused_entries("l"), topic("l-ok", 3, configs=override), *padding[150:]],
            validate_only,
        )  # fmt: skip

        def key(results: dict[str, Any], prefix: str) -> dict[str, tuple[int, str | None]]:
            return {
                n.replace(prefix, "x-"): (r.error_code, r.error_message and r.error_message.replace(prefix, "x-"))
                for n, r in results.items()
                if not n.startswith("pad-")
            }

        assert key(large, "l-") == key(small, "s-")
        assert {key(small, "s-")[n][0] for n in ("dup", "bad name!", "x-cfg", "x-value", "x-zero", "x-rf")} == {
            42, 17, 40, 37, 38
        }  # fmt: skip
        assert key(small, "s-")["existing"][0] == TOPIC_ALREADY_EXISTS and key(small, "s-")["with_dot"][0] == 17
        assert (large["l-ok"].num_partitions, large["l-ok"].configs) == (3, small["s-ok"].configs)
        assert {large[t["name"]].error_code for t in padding} == {0}
        shown = metadata(client, None)
        created = {n for n in shown if n.startswith(("pad-", "l-", "s-"))}
        assert created == (set() if validate_only else {"s-ok", "l-ok", *(t["name"] for t in padding)})


def test_a_server_stopped_in_the_middle_starts_with_whole_topics(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    names = names_of("stop")
    with WireClient(server.port, timeout=TIMEOUT_S) as big, WireClient(server.port, timeout=TIMEOUT_S) as other:
        send_create(big, [topic(n) for n in names])
        deadline = time.monotonic() + TIMEOUT_S
        while metadata(other, [names[0]])[names[0]].error_code != 0:
            assert time.monotonic() < deadline, "the first chunk never showed"
        assert server.kill(signal.SIGTERM) == 0
    server.start()
    with WireClient(server.port, timeout=TIMEOUT_S) as client:
        shown = {n: t for n, t in metadata(client, None).items() if n.startswith("stop-")}
        assert shown and set(shown) <= set(names)
        assert {(t.error_code, len(t.partitions)) for t in shown.values()} == {(0, 1)}
        rest = [n for n in names if n not in shown]  # never created: free to create now
        results = create(client, [topic(n) for n in rest]) if rest else {}
        assert {r.error_code for r in results.values()} <= {0}


@pytest.mark.serial  # latency-bound: run alone, after the parallel run
def test_the_watchdog_counts_no_stall_for_large_creations_and_deletions(make_server: MakeServer) -> None:
    metrics_port = free_port()
    server = make_server("--fsync", "never", "--metrics-port", str(metrics_port), "--stall-warn-ms", "50")
    names = names_of("calm")
    with WireClient(server.port, timeout=TIMEOUT_S) as client:
        results = create(client, [topic(n) for n in names])
        assert {r.error_code for r in results.values()} == {0}
        _, samples = scrape(metrics_port)
        assert value(samples, "regroup_event_loop_stalls_total", api="CreateTopics") == 0
        deleted = client.call(DELETE_TOPICS, 6, topics=[{"name": n, "topic_id": NO_ID} for n in names], timeout=60_000)
        assert {r.error_code for r in deleted.responses} == {0}
        _, samples = scrape(metrics_port)
        assert value(samples, "regroup_event_loop_stalls_total", api="DeleteTopics") == 0
        assert not any(n.startswith("calm-") for n in metadata(client, None))

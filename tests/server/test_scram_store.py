"""The broker's SCRAM credentials (``server/scram_store.py``) and the two APIs over them
(``server/handlers/scram_users.py``): Kafka's AlterUserScramCredentials rules, the durable file, and the ACLs."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.schema.describe_user_scram_credentials.v0 import request as describe_req
from kio.serial import entity_reader, entity_writer

from regroup.model.errors import ApiError, ErrorCode
from regroup.security.acl import AclOperation, ResourceType
from regroup.security.sasl import Complete, Continue
from regroup.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramServer, salted_password
from regroup.server import inspection_answers
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.handlers import scram_users
from regroup.server.offset_answers import CHUNK
from regroup.server.scram_store import (
    MAX_USERS,
    SCRAM_CREDENTIALS_FILE,
    AlterResult,
    ScramDeletion,
    ScramStore,
    ScramStoreError,
    ScramUpsertion,
)
from regroup.storage.format import CorruptLogError
from tests.security.test_scram import Client

SALT = b"0123456789abcdef"


def upsert(user: str, mechanism: int = 1, iterations: int = 4096, password: str = "secret") -> ScramUpsertion:
    scram = SCRAM_SHA_256 if mechanism != 2 else SCRAM_SHA_512
    salted = salted_password(scram, password, SALT, max(iterations, 1))
    return ScramUpsertion(user, mechanism, iterations, SALT, salted)


@pytest.fixture
def store(tmp_path: Path) -> ScramStore:
    s = ScramStore(tmp_path / SCRAM_CREDENTIALS_FILE, sync=False)
    s.load()
    return s


def reopened(store: ScramStore) -> ScramStore:
    again = ScramStore(store.path, sync=False)
    again.load()
    return again


# ---------------------------------------------------------------------- the store


def test_round_trip_across_reopen(store: ScramStore) -> None:
    results = store.alter([upsert("alice", 1), upsert("bob", 2, 8192)], [])
    assert results == [AlterResult("alice", ErrorCode.NONE), AlterResult("bob", ErrorCode.NONE)]
    store.add_user("SCRAM-SHA-512", "alice", "other", 16384, b"salt")
    again = reopened(store)
    assert again.users() == {
        "alice": [("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 16384)],
        "bob": [("SCRAM-SHA-512", 8192)],
    }
    for name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert again.lookup(name, "alice") == store.lookup(name, "alice")
    assert again.lookup("SCRAM-SHA-256", "bob") is None and again.lookup("PLAIN", "alice") is None


def test_a_stored_credential_authenticates(store: ScramStore) -> None:
    store.alter([upsert("alice", 2, 4096, "pw")], [])
    store.add_user("SCRAM-SHA-256", "bob", "bob-pw", 8192, b"bob-salt")
    again = reopened(store)
    for mechanism, user, password in ((SCRAM_SHA_512, "alice", "pw"), (SCRAM_SHA_256, "bob", "bob-pw")):
        server = ScramServer(mechanism, lambda u, m=mechanism: again.lookup(m.name, u), lambda: "srv")
        client = Client(mechanism.hash_name, user, password)
        first = server.evaluate(client.first(), 0)
        assert isinstance(first, Continue)
        assert server.evaluate(client.final(first.challenge), 0) == Complete(user, client.expected_server_final)


def test_the_file_never_holds_a_password(store: ScramStore) -> None:
    store.add_user("SCRAM-SHA-256", "alice", "hunter2-password", 4096, b"salt-salt")
    text = store.path.read_text(encoding="utf-8")
    assert "hunter2" not in text
    doc = json.loads(text)
    assert set(doc["users"]["alice"]["SCRAM-SHA-256"]) == {"salt", "stored_key", "server_key", "iterations"}
    if os.name == "posix":
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_missing_file_is_empty(store: ScramStore) -> None:
    assert store.users() == {} and not store.path.exists()


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        '{"version": 2, "users": {}}',
        '{"version": 1, "users": {"alice": {}}}',
        '{"version": 1, "users": {"alice": {"SCRAM-SHA-1": {}}}}',
        '{"version": 1, "users": {"alice": {"SCRAM-SHA-256": {"salt": "c2FsdA=="}}}}',
    ],
)
def test_a_damaged_file_is_one_line_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / SCRAM_CREDENTIALS_FILE
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorruptLogError) as info:
        ScramStore(path).load()
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_damaged_credential_fields(store: ScramStore) -> None:
    store.alter([upsert("alice")], [])
    good = json.loads(store.path.read_text(encoding="utf-8"))
    for field, value in [("iterations", 100), ("iterations", True), ("stored_key", "!!"), ("server_key", "c2FsdA=="),
                         ("salt", "")]:  # fmt: skip
        doc = json.loads(json.dumps(good))
        doc["users"]["alice"]["SCRAM-SHA-256"][field] = value
        store.path.write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(CorruptLogError, match="alice"):
            reopened(store)


def test_a_stray_temporary_file_is_removed(store: ScramStore) -> None:
    tmp = store.path.with_name(store.path.name + ".tmp")
    tmp.write_text("half", encoding="utf-8")
    reopened(store)
    assert not tmp.exists()


# ---------------------------------------------------------------------- Kafka's per-user rules


def test_kafkas_alter_rules(store: ScramStore) -> None:
    store.alter([upsert("existing", 1), upsert("deleted-and-upserted", 1)], [])
    results = store.alter(
        [
            upsert("twice"),
            upsert("twice", 2),
            upsert("thrice"),
            upsert("thrice"),
            upsert("thrice"),
            upsert("deleted-and-upserted", 2),
            upsert("missing", 1),  # (its deletion failed first: that error stands, as in Kafka)
            upsert("few", iterations=4095),
            upsert("many", iterations=16385),
            upsert("", 1),
            upsert("mech", 0),
            upsert("mech3", 3),
            upsert("ok", 2, 16384),
            ScramUpsertion("nosalt", 1, 4096, b"", b"x" * 32),
        ],
        [
            ScramDeletion("deleted-and-upserted", 1),
            ScramDeletion("missing", 1),
            ScramDeletion("existing", 2),  # exists, but not for this mechanism
        ],
    )
    by_user = {r.user: (r.error, r.message) for r in results}
    assert [r.user for r in results][:3] == ["deleted-and-upserted", "missing", "existing"]
    twice = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    assert by_user == {
        "deleted-and-upserted": twice,
        "missing": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "existing": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "twice": twice,
        "thrice": twice,
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "mech3": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "ok": (ErrorCode.NONE, None),
        "nosalt": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must be 1 to 1024 bytes"),
    }
    assert reopened(store).users() == {
        "deleted-and-upserted": [("SCRAM-SHA-256", 4096)],
        "existing": [("SCRAM-SHA-256", 4096)],
        "ok": [("SCRAM-SHA-512", 16384)],
    }


def test_delete_then_upsert_in_separate_requests(store: ScramStore) -> None:
    store.alter([upsert("alice", 1), upsert("bob", 1)], [])
    assert store.alter([], [ScramDeletion("alice", 1)]) == [AlterResult("alice", ErrorCode.NONE)]
    assert reopened(store).users() == {"bob": [("SCRAM-SHA-256", 4096)]}
    assert store.alter([], [ScramDeletion("alice", 1)])[0].error == ErrorCode.RESOURCE_NOT_FOUND


def test_a_refused_request_writes_nothing(store: ScramStore) -> None:
    store.alter([upsert("alice")], [])
    before = store.path.stat().st_mtime_ns, store.path.read_bytes()
    assert store.alter([upsert("bob", iterations=1)], [ScramDeletion("nobody", 1)])[0].error != ErrorCode.NONE
    assert (store.path.stat().st_mtime_ns, store.path.read_bytes()) == before


def test_a_failed_write_changes_nothing(store: ScramStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.alter([upsert("alice")], [])

    def fail(path: Path, data: bytes, *, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("regroup.server.scram_store.write_file_atomically", fail)
    with pytest.raises(OSError):
        store.alter([upsert("bob")], [ScramDeletion("alice", 1)])
    assert store.users() == {"alice": [("SCRAM-SHA-256", 4096)]}


def test_changes_written_aside_are_one_at_a_time_and_take_effect_once_written(
    store: ScramStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler's changes write the file on a worker thread: the loop runs meanwhile, the credentials on
    disk keep serving until the write returns, and a second change waits for the first (planned against what
    the first left: here it deletes the user the first created)."""
    writes: list[list[str]] = []
    started, proceed = threading.Event(), threading.Event()
    real_write = store._write

    def held_write(credentials: Any) -> None:
        writes.append(sorted(credentials))
        if len(writes) == 1:
            started.set()
            assert proceed.wait(10)
        real_write(credentials)

    monkeypatch.setattr(store, "_write", held_write)

    async def changes() -> tuple[list[Any], list[Any]]:
        loop = asyncio.get_running_loop()
        first = loop.create_task(store.alter_aside([upsert("alice"), upsert("bob")], []))
        assert await loop.run_in_executor(None, started.wait, 10)
        assert store.lookup("SCRAM-SHA-256", "alice") is None  # (the loop runs; the write has not returned)
        second = loop.create_task(store.alter_aside([], [ScramDeletion("alice", 1)]))
        await asyncio.sleep(0.05)
        assert len(writes) == 1  # (the deletion waits for the creation)
        proceed.set()
        return await first, await second

    created, deleted = asyncio.run(changes())
    assert [r.error for r in created] == [ErrorCode.NONE, ErrorCode.NONE]
    assert [r.error for r in deleted] == [ErrorCode.NONE]
    assert writes == [["alice", "bob"], ["bob"]]
    assert store.users() == reopened(store).users() == {"bob": [("SCRAM-SHA-256", 4096)]}


def test_a_deletion_cancelled_while_its_file_is_written_still_takes_effect(
    store: ScramStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its client gone while the file without the credential is written: once written, the credential no
    longer authenticates, as the file says."""
    store.alter([upsert("alice"), upsert("bob")], [])
    started, proceed = threading.Event(), threading.Event()
    real_write = store._write

    def held_write(credentials: Any) -> None:
        started.set()
        assert proceed.wait(10)
        real_write(credentials)

    monkeypatch.setattr(store, "_write", held_write)

    async def change() -> None:
        loop = asyncio.get_running_loop()
        deletion = loop.create_task(store.alter_aside([], [ScramDeletion("alice", 1)]))
        assert await loop.run_in_executor(None, started.wait, 10)
        deletion.cancel()
        await asyncio.sleep(0)
        assert deletion.cancelled()
        proceed.set()
        await store._changing.acquire()  # (let go once the write is done and taken)
        store._changing.release()

    asyncio.run(change())
    assert store.lookup("SCRAM-SHA-256", "alice") is None
    assert store.users() == reopened(store).users() == {"bob": [("SCRAM-SHA-256", 4096)]}


def test_a_failed_write_aside_changes_nothing(store: ScramStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.alter([upsert("alice")], [])

    def fail(path: Path, data: bytes, *, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("regroup.server.scram_store.write_file_atomically", fail)
    with pytest.raises(OSError):
        asyncio.run(store.alter_aside([upsert("bob")], [ScramDeletion("alice", 1)]))
    assert store.users() == {"alice": [("SCRAM-SHA-256", 4096)]}


def test_the_number_of_users_is_bounded(store: ScramStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("regroup.server.scram_store.MAX_USERS", 2)
    results = store.alter([upsert("a"), upsert("b"), upsert("c")], [])
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNACCEPTABLE_CREDENTIAL]
    assert store.alter([upsert("a", 2)], [])[0].error == ErrorCode.NONE  # an existing user may change
    with pytest.raises(ScramStoreError, match="Too many users"):
        store.add_user("SCRAM-SHA-256", "d", "pw", 4096, b"salt")
    assert MAX_USERS == 100_000


def test_add_and_delete_user(store: ScramStore) -> None:
    for args, match in [
        (("SCRAM-SHA-1", "alice", "pw", 4096, b"s"), "unknown SCRAM mechanism"),
        (("SCRAM-SHA-256", "", "pw", 4096, b"s"), "must not be empty"),
        (("SCRAM-SHA-256", "alice", "", 4096, b"s"), "password must not be empty"),
        (("SCRAM-SHA-256", "alice", "pw", 4095, b"s"), "4096 to 16384"),
        (("SCRAM-SHA-512", "alice", "pw", 16385, b"s"), "4096 to 16384"),
        (("SCRAM-SHA-256", "alice", "pw", 4096, b""), "salt"),
    ]:
        with pytest.raises(ScramStoreError, match=match):
            store.add_user(*args)
    store.add_user("SCRAM-SHA-256", "alice", "pw", 4096, b"salt")
    store.add_user("SCRAM-SHA-512", "alice", "pw", 4096, b"salt")
    assert store.delete_user("alice", "SCRAM-SHA-256") == ["SCRAM-SHA-256"]
    with pytest.raises(ScramStoreError, match="has no SCRAM-SHA-256 credential"):
        store.delete_user("alice", "SCRAM-SHA-256")
    assert store.delete_user("alice") == ["SCRAM-SHA-512"]
    assert reopened(store).users() == {}


# ---------------------------------------------------------------------- the APIs


@dataclass
class Broker:
    scram: ScramStore | None
    authorizer: Any = None


@dataclass
class DenyAll:
    asked: list[tuple[AclOperation, ResourceType, str]]

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        self.asked.append((operation, resource_type, name))
        return False


def wire(entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return entity_reader(type(entity))(buffer.getvalue(), 0)[0]


def answered(answer: Any) -> Any:
    """A handler's answer as a client decodes it (encoded by hand: ``PreEncoded``; else a kio entity)."""
    return answer.decode() if isinstance(answer, PreEncoded) else wire(answer)


def ctx(api_key: int) -> RequestContext:
    return RequestContext(api_key, 0, 1, "test", "127.0.0.1", 1, principal="User:alice")


def describe(broker: Broker, users: list[str] | None) -> Any:
    names = None if users is None else tuple(describe_req.UserName(name=u) for u in users)
    request = wire(describe_req.DescribeUserScramCredentialsRequest(users=names))
    return answered(asyncio.run(scram_users.handle_describe(broker, ctx(50), request)))


def alter(broker: Broker, upsertions: list[ScramUpsertion], deletions: list[ScramDeletion]) -> Any:
    request = wire(
        alter_req.AlterUserScramCredentialsRequest(
            deletions=tuple(alter_req.ScramCredentialDeletion(name=d.user, mechanism=d.mechanism) for d in deletions),
            upsertions=tuple(
                alter_req.ScramCredentialUpsertion(
                    name=u.user, mechanism=u.mechanism, iterations=u.iterations, salt=u.salt,
                    salted_password=u.salted_password,
                )
                for u in upsertions
            ),
        )
    )  # fmt: skip
    return answered(asyncio.run(scram_users.handle_alter(broker, ctx(51), request)))


def test_describe_all_and_named_users(store: ScramStore) -> None:
    broker = Broker(store)
    response = alter(broker, [upsert("alice", 1), upsert("bob", 2, 8192)], [])
    assert [(r.user, r.error_code) for r in response.results] == [("alice", 0), ("bob", 0)]
    alter(broker, [upsert("alice", 2)], [])
    everyone = describe(broker, None)
    assert everyone.error_code == 0
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in everyone.results] == [
        ("alice", [(1, 4096), (2, 4096)]),
        ("bob", [(2, 8192)]),
    ]
    assert [r.user for r in describe(broker, []).results] == ["alice", "bob"]
    named = describe(broker, ["bob", "carol", "alice", "alice"])
    assert [(r.user, r.error_code, r.error_message) for r in named.results] == [
        ("bob", 0, None),
        ("carol", 91, "Attempt to describe a user credential that does not exist: carol"),
        ("alice", 92, "Cannot describe SCRAM credentials for the same user twice in a single request: alice"),
    ]


def test_alter_results_on_the_wire(store: ScramStore) -> None:
    response = alter(Broker(store), [upsert("x", 9)], [ScramDeletion("y", 1)])
    assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
        ("y", 91, "Attempt to delete a user credential that does not exist"),
        ("x", 33, "Unknown SCRAM mechanism"),
    ]


def test_acls_are_checked(store: ScramStore) -> None:
    authorizer = DenyAll([])
    broker = Broker(store, authorizer)
    with pytest.raises(ApiError) as info:
        describe(broker, ["alice"])
    assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(ApiError) as info:
        alter(broker, [upsert("alice")], [])
    assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert authorizer.asked == [
        (AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
        (AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"),
    ]
    assert store.users() == {}


def test_error_responses() -> None:
    request = describe_req.DescribeUserScramCredentialsRequest(users=(describe_req.UserName(name="a"),))
    response = wire(scram_users._describe_error(ctx(50), request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    assert (response.error_code, response.error_message) == (31, "Cluster authorization failed.")
    assert [(r.user, r.error_code) for r in response.results] == [("a", 31)]
    request = alter_req.AlterUserScramCredentialsRequest(
        deletions=(alter_req.ScramCredentialDeletion(name="b", mechanism=1),),
        upsertions=tuple(
            alter_req.ScramCredentialUpsertion(name=n, mechanism=1, iterations=4096, salt=b"s", salted_password=b"p")
            for n in ("c", "b")
        ),
    )
    response = wire(scram_users._alter_error(ctx(51), request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    assert [(r.user, r.error_code) for r in response.results] == [("b", 31), ("c", 31)]
    assert [(s.api_key, s.min_version, s.max_version) for s in scram_users.SPECS] == [(50, 0, 0), (51, 0, 0)]


def test_a_broker_without_scram_credentials() -> None:
    broker = Broker(None)
    response = describe(broker, ["a"])
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(r.user, r.error_code) for r in response.results] == [("a", 35)]
    response = alter(broker, [upsert("a")], [ScramDeletion("b", 1)])
    assert [(r.user, r.error_code) for r in response.results] == [("a", 35), ("b", 35)]


def test_a_failed_write_is_a_storage_error(store: ScramStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(path: Path, data: bytes, *, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("regroup.server.scram_store.write_file_atomically", fail)
    response = alter(Broker(store), [upsert("a")], [])
    assert [(r.user, r.error_code) for r in response.results] == [("a", 56)]  # KAFKA_STORAGE_ERROR


def test_many_users_are_altered_and_described_between_yields(
    store: ScramStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alteration naming many users (each once, one twice) answers each in the order first named, and a
    description of them all gives the loop turns while it is encoded (``DESCRIBED_USER_WEIGHT`` units a user)."""
    pauses: list[int] = []
    real = inspection_answers.pause

    async def counted() -> None:
        pauses.append(1)
        await real()

    monkeypatch.setattr(inspection_answers, "pause", counted)
    broker = Broker(store)
    one = upsert("u-0000", 1)
    names = [f"u-{i:04d}" for i in range(2 * CHUNK // scram_users.DESCRIBED_USER_WEIGHT + 1)]
    changes = [ScramUpsertion(n, 1, 4096, SALT, one.salted_password) for n in names]
    response = alter(broker, [*changes, changes[5]], [])
    assert [(r.user, r.error_code) for r in response.results] == [
        (n, 92 if i == 5 else 0) for i, n in enumerate(names)
    ]  # (named twice: DUPLICATE_RESOURCE, in the place first named)
    before = len(pauses)
    everyone = describe(broker, None)
    assert sorted(r.user for r in everyone.results) == sorted(n for i, n in enumerate(names) if i != 5)
    assert len(pauses) - before >= 1

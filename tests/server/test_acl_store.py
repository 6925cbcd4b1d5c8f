"""The durable ACLs (``acls.json``): a round trip across reopening, damage refused at start, a failed write that
changes nothing; and the DescribeAcls / CreateAcls / DeleteAcls handlers over them, at every version kio has,
each request and response through kio's codec."""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from regroup.model.errors import ApiError, ErrorCode
from regroup.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.authorizer import Authorizer
from regroup.security.bindings import ANY_FILTER, AclBinding, AclBindingFilter, exact_filter
from regroup.server import acl_store
from regroup.server.acl_store import ACL_FILE, AclStore
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.handlers import acls as handlers
from regroup.storage.format import CorruptLogError

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType


def acl(
    name: str,
    op: AclOperation = Op.READ,
    perm: AclPermissionType = Perm.ALLOW,
    principal: str = "User:alice",
    pattern: PatternType = PT.LITERAL,
    rt: ResourceType = RT.TOPIC,
) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, "*", op, perm)


def open_store(directory: Path, **kwargs: Any) -> AclStore:
    store = AclStore(directory / ACL_FILE, sync=True, authorizer=Authorizer(**kwargs))
    store.load()
    return store


# ---------------------------------------------------------------------- the store


def test_round_trip_across_reopen(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert store.authorizer.bindings() == []
    created = [acl("orders"), acl("pay", Op.WRITE, pattern=PT.PREFIXED), acl("g", Op.ALL, Perm.DENY, rt=RT.GROUP)]
    odd = acl('naïve \udc80 "quoted"', principal="User:CN=x,O=y")
    assert store.create([*created, odd, created[0]]) == [None] * 5
    assert store.delete([exact_filter(created[1])]) == [[created[1]]]
    reopened = open_store(tmp_path)
    assert reopened.authorizer.bindings() == [created[0], created[2], odd]
    assert reopened.authorizer.authorize("User:alice", "h", Op.READ, RT.TOPIC, "orders")
    raw = json.loads((tmp_path / ACL_FILE).read_text(encoding="utf-8"))
    assert raw["version"] == 1 and raw["acls"][0] == ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"]


def test_load_replaces_what_the_authorizer_held(tmp_path: Path) -> None:
    open_store(tmp_path).create([acl("a")])
    store = AclStore(tmp_path / ACL_FILE, sync=False, authorizer=Authorizer())
    store.authorizer.add([acl("stale")])
    (tmp_path / (ACL_FILE + ".tmp")).write_text("half a write", encoding="utf-8")
    store.load()
    assert store.authorizer.bindings() == [acl("a")]
    assert not (tmp_path / (ACL_FILE + ".tmp")).exists()


def test_create_reports_each_refusal(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    results = store.create([acl("ok"), acl(""), acl("x", principal="nobody"), acl("c", rt=RT.CLUSTER)])
    assert results[0] is None
    assert results[1] == "Invalid empty resource name"
    assert results[2] is not None and results[2].startswith("Invalid principal")
    assert results[3] == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert open_store(tmp_path).authorizer.bindings() == [acl("ok")]


def test_delete_matches_every_filter_against_the_acls_before(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    a, b = acl("a"), acl("b", Op.WRITE)
    store.create([a, b])
    by_name = AclBindingFilter(RT.TOPIC, "a", PT.LITERAL)
    assert store.delete([by_name, ANY_FILTER, by_name]) == [[a], [a, b], [a]]
    assert open_store(tmp_path).authorizer.bindings() == []
    assert store.delete([ANY_FILTER]) == [[]]


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"version": 2, "acls": []}',
        '{"version": 1}',
        '{"version": 1, "acls": [["TOPIC", "a"]]}',
        '{"version": 1, "acls": [["TOPIC", "a", "LITERAL", "User:a", "*", "READ", 3]]}',
        '{"version": 1, "acls": [["TOPIK", "a", "LITERAL", "User:a", "*", "READ", "ALLOW"]]}',
        '{"version": 1, "acls": [["TOPIC", "", "LITERAL", "User:a", "*", "READ", "ALLOW"]]}',
        '{"version": 1, "acls": [["TOPIC", "a", "MATCH", "User:a", "*", "READ", "ALLOW"]]}',
        '{"version": 1, "acls": [["TOPIC", "a", "LITERAL", "alice", "*", "READ", "ALLOW"]]}',
    ],
)
def test_damaged_file_stops_the_start(tmp_path: Path, text: str) -> None:
    (tmp_path / ACL_FILE).write_text(text, encoding="utf-8")
    store = AclStore(tmp_path / ACL_FILE, sync=False, authorizer=Authorizer())
    with pytest.raises(CorruptLogError, match=ACL_FILE):
        store.load()
    assert (tmp_path / ACL_FILE).read_text(encoding="utf-8") == text  # left for the operator


def test_a_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    kept = acl("kept")
    store.create([kept])
    before = (tmp_path / ACL_FILE).read_bytes()

    def fail(path: Path, data: bytes, *, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(acl_store, "write_file_atomically", fail)
    with pytest.raises(OSError, match="No space"):
        store.create([acl("new")])
    with pytest.raises(OSError, match="No space"):
        store.delete([ANY_FILTER])
    assert store.authorizer.bindings() == [kept]
    assert not store.authorizer.authorize("User:alice", "h", Op.READ, RT.TOPIC, "new")
    assert (tmp_path / ACL_FILE).read_bytes() == before


def _hold_first_write(
    store: AclStore, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], threading.Event, threading.Event]:
    """The store's file writes, each noted by the ACLs it writes; the first sets ``started`` and waits for
    ``proceed`` before writing."""
    writes: list[int] = []
    started, proceed = threading.Event(), threading.Event()
    real_write = store._write

    def held_write(bindings: list[AclBinding]) -> None:
        writes.append(len(bindings))
        if len(writes) == 1:
            started.set()
            assert proceed.wait(10)
        real_write(bindings)

    monkeypatch.setattr(store, "_write", held_write)
    return writes, started, proceed


def test_changes_written_aside_are_one_at_a_time_and_durable_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handlers' changes write the file on a worker thread: the loop runs meanwhile, the authorizer keeps
    the ACLs on disk until the write returns, and a second change waits for the first (it is planned against
    the ACLs the first made)."""
    store = open_store(tmp_path)
    writes, started, proceed = _hold_first_write(store, monkeypatch)

    async def changes() -> list[list[AclBinding]]:
        loop = asyncio.get_running_loop()
        first = loop.create_task(store.create_aside([acl("a"), acl("b")]))
        assert await loop.run_in_executor(None, started.wait, 10)
        assert acl("a") not in store.authorizer  # (the loop runs; the write has not returned)
        second = loop.create_task(store.delete_aside([exact_filter(acl("a"))]))
        await asyncio.sleep(0.05)
        assert writes == [2]  # (the deletion waits for the creation)
        proceed.set()
        assert await first == [None, None]
        return await second

    assert asyncio.run(changes()) == [[acl("a")]]
    assert writes == [2, 1]
    assert store.authorizer.bindings() == [acl("b")]
    assert open_store(tmp_path).authorizer.bindings() == [acl("b")]


def test_a_deletion_cancelled_while_its_file_is_written_still_takes_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its client gone (the connection cancels its handler) while the file without the ACL is written: once
    written, the ACL no longer grants, as the file says, and the next change waits for that."""
    store = open_store(tmp_path)
    store.create([acl("a"), acl("b")])
    writes, started, proceed = _hold_first_write(store, monkeypatch)

    async def changes() -> list[str | None]:
        loop = asyncio.get_running_loop()
        deletion = loop.create_task(store.delete_aside([exact_filter(acl("a"))]))
        assert await loop.run_in_executor(None, started.wait, 10)
        deletion.cancel()
        await asyncio.sleep(0)
        creation = loop.create_task(store.create_aside([acl("c")]))
        await asyncio.sleep(0.05)
        assert writes == [1]  # (the creation waits for the cancelled deletion's write)
        proceed.set()
        return await creation

    assert asyncio.run(changes()) == [None]
    assert writes == [1, 2]
    assert store.authorizer.bindings() == [acl("b"), acl("c")]
    assert open_store(tmp_path).authorizer.bindings() == [acl("b"), acl("c")]


def test_a_failed_write_aside_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    store.create([acl("kept")])

    def fail(path: Path, data: bytes, *, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(acl_store, "write_file_atomically", fail)
    with pytest.raises(OSError, match="No space"):
        asyncio.run(store.create_aside([acl("new")]))
    with pytest.raises(OSError, match="No space"):
        asyncio.run(store.delete_aside([ANY_FILTER]))
    assert store.authorizer.bindings() == [acl("kept")]


def test_the_bound_on_acls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acl_store, "MAX_ACLS", 3)
    store = open_store(tmp_path)
    assert store.create([acl("a"), acl("b")]) == [None, None]
    results = store.create([acl("a"), acl("c"), acl("d"), acl("")])
    assert results[0] is None and results[3] == "Invalid empty resource name"
    assert results[1] == results[2] == "The broker holds at most 3 ACLs"
    assert store.authorizer.bindings() == [acl("a"), acl("b")]
    assert store.create([acl("c")]) == [None]


# ---------------------------------------------------------------------- the handlers

KEYS = {"describe_acls": 29, "create_acls": 30, "delete_acls": 31}


def wire(entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    decoded, _ = entity_reader(type(entity))(buffer.getvalue(), 0)
    return decoded


def module(api: str, version: int, kind: str = "request") -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def call(broker: Any, api: str, version: int, request: Any, principal: str = "User:admin") -> Any:
    ctx = RequestContext(KEYS[api], version, 1, "test", "127.0.0.1", 1, principal=principal)
    handler = {"describe_acls": handlers.handle_describe_acls, "create_acls": handlers.handle_create_acls}.get(
        api, handlers.handle_delete_acls
    )
    response = asyncio.run(handler(broker, ctx, wire(request)))
    if isinstance(response, PreEncoded):  # (a DescribeAcls answer, encoded by hand)
        assert response.response_class.__module__ == f"kio.schema.{api}.v{version}.response"
        return response.decode()
    assert type(response).__module__ == f"kio.schema.{api}.v{version}.response"
    return wire(response)


def creation(version: int, b: AclBinding) -> Any:
    return module("create_acls", version).AclCreation(
        resource_type=b.resource_type,
        resource_name=b.resource_name,
        resource_pattern_type=b.pattern_type,
        principal=b.principal,
        host=b.host,
        operation=b.operation,
        permission_type=b.permission,
    )


def filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission,
    }


def create(broker: Any, version: int, *bindings: AclBinding, principal: str = "User:admin") -> list[tuple[int, Any]]:
    request = module("create_acls", version).CreateAclsRequest(creations=tuple(creation(version, b) for b in bindings))
    response = call(broker, "create_acls", version, request, principal)
    return [(int(r.error_code), r.error_message) for r in response.results]


def describe(broker: Any, version: int, f: AclBindingFilter) -> Any:
    return call(
        broker, "describe_acls", version, module("describe_acls", version).DescribeAclsRequest(**filter_fields(f))
    )


def delete(broker: Any, version: int, *filters: AclBindingFilter) -> Any:
    mod = module("delete_acls", version)
    request = mod.DeleteAclsRequest(filters=tuple(mod.DeleteAclsFilter(**filter_fields(f)) for f in filters))
    return call(broker, "delete_acls", version, request)


def broker_with(store: AclStore | None) -> Any:
    return SimpleNamespace(acls=store, authorizer=None if store is None else store.authorizer)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_without_an_authorizer_every_acl_api_is_security_disabled(version: int) -> None:
    broker = broker_with(None)
    assert create(broker, version, acl("a"), acl("b")) == [(54, "No Authorizer is configured.")] * 2
    described = describe(broker, version, ANY_FILTER)
    assert (int(described.error_code), described.error_message) == (54, "No Authorizer is configured on the broker")
    deleted = delete(broker, version, ANY_FILTER)
    assert [(int(r.error_code), r.error_message, r.matching_acls) for r in deleted.filter_results] == [
        (54, "No Authorizer is configured.", ())
    ]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_describe_delete(tmp_path: Path, version: int) -> None:
    store = open_store(tmp_path, super_users=frozenset({"User:admin"}))
    broker = broker_with(store)
    lit, pre, wild = acl("orders"), acl("ord", Op.WRITE, pattern=PT.PREFIXED), acl("*", Op.DESCRIBE, principal="User:*")
    results = create(broker, version, lit, pre, wild, acl(""), acl("x", principal="bob"))
    assert results[:3] == [(0, None)] * 3
    assert results[3] == (42, "Invalid empty resource name")
    assert results[4][0] == 42 and "principalType:principalName" in results[4][1]

    described = describe(broker, version, AclBindingFilter(RT.TOPIC, "orders", PT.MATCH))
    assert int(described.error_code) == 0
    seen = {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
        for r in described.resources
        for a in r.acls
    }
    assert seen == {
        (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission)
        for b in (lit, pre, wild)
    }
    unknown = describe(broker, version, AclBindingFilter(operation=Op.UNKNOWN))
    assert (int(unknown.error_code), unknown.error_message) == (42, "Unknown entryFilter.")

    prefixed, bad = AclBindingFilter(RT.TOPIC, "ord", PT.PREFIXED), AclBindingFilter(pattern_type=PT.UNKNOWN)
    deleted = delete(broker, version, prefixed, bad)
    first, second = deleted.filter_results
    assert int(first.error_code) == 0 and [(m.resource_name, m.operation) for m in first.matching_acls] == [
        ("ord", Op.WRITE)
    ]
    assert (int(second.error_code), second.error_message, second.matching_acls) == (42, "Unknown patternFilter.", ())
    assert open_store(tmp_path).authorizer.bindings() == [lit, wild]


def test_acl_apis_need_cluster_acls(tmp_path: Path) -> None:
    store = open_store(tmp_path, super_users=frozenset({"User:admin"}))
    broker = broker_with(store)
    with pytest.raises(ApiError) as refused:
        create(broker, 3, acl("a"), principal="User:mallory")
    assert refused.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    cluster = acl("kafka-cluster", Op.DESCRIBE, principal="User:ops", rt=RT.CLUSTER)
    assert create(broker, 3, cluster) == [(0, None)]
    request = module("describe_acls", 3).DescribeAclsRequest(**filter_fields(ANY_FILTER))
    assert int(call(broker, "describe_acls", 3, request, "User:ops").error_code) == 0  # DESCRIBE on the cluster
    with pytest.raises(ApiError):  # ALTER is another operation
        create(broker, 3, acl("a"), principal="User:ops")
    assert store.authorizer.bindings() == [cluster]


def test_a_failed_write_is_a_storage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = broker_with(open_store(tmp_path, allow_everyone_if_no_acl_found=True))

    def fail(path: Path, data: bytes, *, sync: bool) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(acl_store, "write_file_atomically", fail)
    assert create(broker, 2, acl("a"))[0][0] == 56
    assert broker.acls.authorizer.bindings() == []


@pytest.mark.parametrize("version", [1, 3])
def test_error_responses_fill_every_slot(version: int) -> None:
    ctx = RequestContext(30, version, 1, None, "h", 1)
    request = module("create_acls", version).CreateAclsRequest(creations=(creation(version, acl("a")),) * 2)
    response = wire(handlers._create_error(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    assert [int(r.error_code) for r in response.results] == [31, 31]
    ctx = RequestContext(31, version, 1, None, "h", 1)
    mod = module("delete_acls", version)
    request = mod.DeleteAclsRequest(filters=(mod.DeleteAclsFilter(**filter_fields(ANY_FILTER)),))
    response = wire(handlers._delete_error(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    assert [int(r.error_code) for r in response.filter_results] == [31]
    ctx = RequestContext(29, version, 1, None, "h", 1)
    request = module("describe_acls", version).DescribeAclsRequest(**filter_fields(ANY_FILTER))
    assert int(wire(handlers._describe_error(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)).error_code) == 31

"""Kafka's API-to-ACL table end to end: one ``regroup serve`` with SASL/PLAIN and the StandardAuthorizer
(``super.users=User:admin``), ACLs created by the admin through CreateAcls with kafka-python's admin client,
and alice and bob talking raw frames (and kafka-python clients) after a SASL handshake.

For each API a principal without the ACL gets Kafka's error and nothing changes (the admin, a super user,
looks: offsets, groups, topics, records, configurations), and with the ACL the same request succeeds. DENY
beats ALLOW, PREFIXED and wildcard (``*``) patterns apply, and what a principal may not DESCRIBE is hidden the
way Kafka hides it. Tests use their own resource names; ACLs that would reach beyond a test (the wildcard, the
cluster) are deleted at its end."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from tests.server import test_share_wire as share
from tests.server.conftest import ServerProcess, assert_clean_log, configured, free_port
from tests.server.wire import WireClient, create_topics, encode_request
from tests.server_data.batches import make_batch

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.admin import (  # noqa: E402
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import TopicAuthorizationFailedError  # noqa: E402

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE_GROUPS, LIST_GROUPS, SASL_HANDSHAKE = 11, 12, 13, 14, 15, 16, 17
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PID, ADD_PARTITIONS, ADD_OFFSETS = 19, 20, 21, 22, 24, 25
END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_CONFIGS, ALTER_CONFIGS, SASL_AUTHENTICATE = 26, 28, 32, 33, 36
CREATE_PARTITIONS, DELETE_GROUPS, INCREMENTAL_ALTER, OFFSET_DELETE, DESCRIBE_CLUSTER = 37, 42, 44, 47, 60
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS, CG_HEARTBEAT, CG_DESCRIBE, DESCRIBE_TOPIC_PARTITIONS = (
    61, 65, 66, 68, 69, 75,
)  # fmt: skip
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, GROUP_RESOURCE = 2, 4, 8, 32
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
ALICE, BOB, EVERYONE = "User:alice", "User:bob", "User:*"
ZERO_UUID = uuid.UUID(int=0)
#: how a zero topic id (none disclosed) reads back
NO_ID: Any = None
INT32_MIN = -(2**31)
#: KIP-430 bits: AclOperation codes
OP_READ, OP_WRITE, OP_CREATE, OP_DELETE, OP_ALTER, OP_DESCRIBE = 3, 4, 5, 6, 7, 8
OP_CLUSTER_ACTION, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS, OP_IDEMPOTENT_WRITE = 9, 10, 11, 12


def bits(*operations: int) -> int:
    return sum(1 << op for op in set(operations))


# ---------------------------------------------------------------------------------------------- the server
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _secured(tmp_path_factory)


def _secured(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[ServerProcess]:
    """A server with SASL/PLAIN and the authorizer on (``args``: more options), killed when done."""
    base = tmp_path_factory.mktemp("authz")
    port = free_port()
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
        + ";"
    )
    proc = configured(
        base,
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n",
        port,
        *args,
    )
    try:
        yield proc
    finally:
        proc.kill()
    assert_clean_log(proc)


def signed_in(port: int, user: str) -> WireClient:
    """A raw client authenticated as ``user`` with SASL/PLAIN."""
    client = WireClient(port, client_id=f"{user}-wire")
    assert client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == E.none
    token = b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()
    assert client.call(SASL_AUTHENTICATE, 2, auth_bytes=token).error_code == E.none
    return client


def kafka_python(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
    }


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Iterator[WireClient]:
    with signed_in(server.port, "admin") as client:
        yield client


@pytest.fixture(scope="module")
def alice(server: ServerProcess) -> Iterator[WireClient]:
    with signed_in(server.port, "alice") as client:
        yield client


@pytest.fixture(scope="module")
def bob(server: ServerProcess) -> Iterator[WireClient]:
    with signed_in(server.port, "bob") as client:
        yield client


@pytest.fixture(scope="module")
def acls(server: ServerProcess) -> Iterator[KafkaAdminClient]:
    """kafka-python's admin client as the super user: it creates and deletes the ACLs."""
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{server.port}", **kafka_python("admin"))
    try:
        yield client
    finally:
        client.close()


_RESOURCE_TYPES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.CLUSTER,
    "txn": ResourceType.TRANSACTIONAL_ID,
}


def acl(
    kind: str, name: str, operation: str, principal: str = ALICE, *, deny: bool = False, prefixed: bool = False
) -> ACL:
    pattern = ACLResourcePatternType.PREFIXED if prefixed else ACLResourcePatternType.LITERAL
    return ACL(
        principal,
        "*",
        ACLOperation[operation],
        ACLPermissionType.DENY if deny else ACLPermissionType.ALLOW,
        ResourcePattern(_RESOURCE_TYPES[kind], name, pattern),
    )


def grant(admin_client: KafkaAdminClient, *bindings: ACL) -> None:
    result = admin_client.create_acls(list(bindings))
    assert not result["failed"], result
    assert len(result["succeeded"]) == len(bindings)


@contextlib.contextmanager
def granted(admin_client: KafkaAdminClient, *bindings: ACL) -> Iterator[None]:
    """ACLs in force for the block only (deleted after it)."""
    grant(admin_client, *bindings)
    try:
        yield
    finally:
        filters = [
            ACLFilter(
                b.principal,
                b.host,
                b.operation,
                b.permission_type,
                ResourcePatternFilter(b.resource_pattern.resource_type, b.resource_pattern.resource_name,
                                      b.resource_pattern.pattern_type),
            )
            for b in bindings
        ]  # fmt: skip
        admin_client.delete_acls(filters)


# ------------------------------------------------------------------------------------------------ helpers
def metadata(client: WireClient, names: list[str] | None, *, auto: bool = False, version: int = 12) -> dict[str, Any]:
    topics = None if names is None else [{"name": n, "topic_id": ZERO_UUID} for n in names]
    response = client.call(
        METADATA, version, topics=topics, allow_auto_topic_creation=auto, include_topic_authorized_operations=True
    )
    return {t.name: t for t in response.topics}


def topic_id(admin: WireClient, name: str) -> uuid.UUID:
    found: uuid.UUID = metadata(admin, [name])[name].topic_id
    assert found not in (NO_ID, ZERO_UUID)
    return found


def exists(admin: WireClient, name: str) -> bool:
    return bool(metadata(admin, [name])[name].error_code == E.none)


def produce(
    client: WireClient, topic: str, values: list[bytes], *, tid: str | None = None, batch: bytes | None = None
) -> Any:
    response = client.call(
        PRODUCE,
        9,
        transactional_id=tid,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch or make_batch(values)}]}],
    )
    return response.responses[0].partition_responses[0]


def fetch(client: WireClient, topic: str | uuid.UUID, replica_id: int = -1) -> Any:
    by_id = isinstance(topic, uuid.UUID)
    entry = {"topic_id": topic} if by_id else {"topic": topic}
    response = client.call(
        FETCH,
        13 if by_id else 11,
        replica_id=replica_id,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[entry | {"partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                         "current_leader_epoch": -1, "log_start_offset": -1}]}],
        forgotten_topics_data=[],
        rack_id="",
    )  # fmt: skip
    return response.responses[0].partitions[0]


def end_offset(client: WireClient, topic: str, timestamp: int = -1) -> Any:
    partitions = [{"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]
    response = client.call(
        LIST_OFFSETS, 5, replica_id=-1, isolation_level=0, topics=[{"name": topic, "partitions": partitions}]
    )
    return response.topics[0].partitions[0]


def commit(client: WireClient, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}
        )  # fmt: skip
    response = client.call(
        OFFSET_COMMIT,
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
    )
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def committed(
    client: WireClient, group: str, topics: dict[str, list[int]] | None = None
) -> tuple[Any, dict[tuple[str, int], tuple[int, Any]]]:
    """(the group's error, (topic, partition) -> (offset, error)) from OffsetFetch v7."""
    wanted = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    response = client.call(OFFSET_FETCH, 7, group_id=group, topics=wanted, require_stable=False)
    rows = {
        (t.name, p.partition_index): (p.committed_offset, p.error_code) for t in response.topics for p in t.partitions
    }
    return response.error_code, rows


def join(client: WireClient, group: str, member_id: str = "") -> Any:
    return client.call(
        JOIN,
        5,
        group_id=group,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )


def groups_listed(client: WireClient) -> set[str]:
    response = client.call(LIST_GROUPS, 4, states_filter=[])
    assert response.error_code == E.none
    return {g.group_id for g in response.groups}


def describe_configs(client: WireClient, resource_type: int, name: str) -> Any:
    response = client.call(
        DESCRIBE_CONFIGS,
        4,
        resources=[{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        include_synonyms=False,
        include_documentation=False,
    )
    return response.results[0]


def config_value(admin: WireClient, resource_type: int, name: str, key: str) -> str | None:
    result = describe_configs(admin, resource_type, name)
    assert result.error_code == E.none
    return {c.name: c.value for c in result.configs}.get(key)


def incremental(client: WireClient, resource_type: int, name: str, configs: dict[str, str]) -> Any:
    response = client.call(
        INCREMENTAL_ALTER,
        1,
        resources=[
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()],
            }
        ],
        validate_only=False,
    )
    return response.responses[0]


def init_pid(client: WireClient, tid: str | None) -> Any:
    return client.call(INIT_PID, 4, transactional_id=tid, transaction_timeout=60_000, producer_id=-1, producer_epoch=-1)


def add_partitions(
    client: WireClient, tid: str, pid: int, epoch: int, parts: dict[str, list[int]]
) -> dict[tuple[str, int], Any]:
    response = client.call(
        ADD_PARTITIONS,
        3,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in parts.items()],
    )
    return {
        (t.name, r.partition_index): r.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for r in t.results_by_partition
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ------------------------------------------------------------------------------------------- Metadata & co
def test_metadata_hides_what_the_principal_may_not_describe(
    admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient
) -> None:
    seen, hidden = unique("md-seen"), unique("md-hidden")
    create_topics(admin, {seen: 1, hidden: 2})
    grant(acls, acl("topic", seen, "DESCRIBE"))
    # all topics: the others are left out silently
    everything = metadata(alice, None)
    assert seen in everything and hidden not in everything
    assert everything[seen].topic_authorized_operations == bits(OP_DESCRIBE)
    # by name: refused whether or not the topic exists, with nothing disclosed
    named = metadata(alice, [seen, hidden, "md-absent"])
    assert named[seen].error_code == E.none and len(named[seen].partitions) == 1
    for name in (hidden, "md-absent"):
        assert (named[name].error_code, named[name].topic_id, named[name].partitions) == (
            E.topic_authorization_failed,
            NO_ID,
            (),
        )
        assert named[name].topic_authorized_operations == INT32_MIN
    # by id: the id is not secret, the name is
    hidden_id = topic_id(admin, hidden)
    by_id = alice.call(METADATA, 12, topics=[{"name": None, "topic_id": hidden_id},
                                              {"name": None, "topic_id": uuid.uuid4()}],
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False).topics  # fmt: skip
    assert (by_id[0].error_code, by_id[0].name, by_id[0].topic_id) == (E.topic_authorization_failed, None, hidden_id)
    assert by_id[1].error_code == E.unknown_topic_id
    # the cluster's operations (v8-v10): 0 without DESCRIBE on the cluster, all of them for the super user
    asked = {"topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
             "include_topic_authorized_operations": False}  # fmt: skip
    assert bob.call(METADATA, 10, **asked).cluster_authorized_operations == 0
    assert admin.call(METADATA, 10, **asked).cluster_authorized_operations == bits(
        OP_CREATE, OP_ALTER, OP_DESCRIBE, OP_CLUSTER_ACTION, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS, OP_IDEMPOTENT_WRITE
    )


def test_auto_creation_needs_create(admin: WireClient, alice: WireClient, acls: KafkaAdminClient) -> None:
    auto = unique("md-auto")
    grant(acls, acl("topic", auto, "DESCRIBE"))
    refused = metadata(alice, [auto], auto=True)[auto]
    assert (refused.error_code, refused.topic_id) == (E.topic_authorization_failed, NO_ID)
    assert not exists(admin, auto)
    grant(acls, acl("topic", auto, "CREATE"))
    created = metadata(alice, [auto], auto=True)[auto]
    assert created.error_code == E.none and created.topic_id not in (NO_ID, ZERO_UUID)
    assert created.topic_authorized_operations == bits(OP_CREATE, OP_DESCRIBE)
    assert exists(admin, auto)


def test_create_partitions_and_delete_topics(
    admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient
) -> None:
    prefix = unique("ct")
    name = f"{prefix}-a"

    def create(client: WireClient) -> Any:
        topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        return client.call(CREATE_TOPICS, 7, topics=[topic], timeout=5000, validate_only=False).topics[0]

    refused = create(alice)
    assert (refused.error_code, refused.error_message) == (E.topic_authorization_failed, "Authorization failed.")
    assert not exists(admin, name)
    grant(acls, acl("topic", f"{prefix}-", "CREATE", prefixed=True))  # a PREFIXED pattern
    made = create(alice)
    assert made.error_code == E.none and made.topic_id not in (NO_ID, ZERO_UUID)
    # created, but its configuration is not alice's to see (no DESCRIBE_CONFIGS)
    assert (made.topic_config_error_code, made.num_partitions, made.configs) == (E.topic_authorization_failed, -1, ())
    assert exists(admin, name)

    def grow(client: WireClient) -> Any:
        topics = [{"name": name, "count": 3, "assignments": None}]
        return client.call(CREATE_PARTITIONS, 3, topics=topics, timeout=5000, validate_only=False).results[0]

    assert grow(alice).error_code == E.topic_authorization_failed
    assert len(metadata(admin, [name])[name].partitions) == 1
    grant(acls, acl("topic", name, "ALTER"))
    assert grow(alice).error_code == E.none
    assert len(metadata(admin, [name])[name].partitions) == 3

    the_id = topic_id(admin, name)

    def delete(client: WireClient, *, by_id: bool) -> Any:
        entry = {"name": None, "topic_id": the_id} if by_id else {"name": name, "topic_id": ZERO_UUID}
        return client.call(DELETE_TOPICS, 6, topics=[entry], timeout=5000).responses[0]

    # alice may DESCRIBE (ALTER implies it) but not DELETE; bob may do neither: by id he does not learn the name
    by_name = delete(alice, by_id=False)
    assert (by_name.error_code, by_name.name, by_name.topic_id) == (E.topic_authorization_failed, name, NO_ID)
    assert (delete(alice, by_id=True).error_code, delete(alice, by_id=True).name) == (
        E.topic_authorization_failed,
        name,
    )
    hidden = delete(bob, by_id=True)
    assert (hidden.error_code, hidden.name, hidden.topic_id) == (E.topic_authorization_failed, None, the_id)
    assert delete(bob, by_id=False).error_code == E.topic_authorization_failed
    assert exists(admin, name)
    grant(acls, acl("topic", name, "DELETE"))
    assert delete(alice, by_id=True).error_code == E.none
    assert not exists(admin, name)


# ------------------------------------------------------------------------------------------- the data plane
def test_produce_fetch_list_offsets_and_delete_records(
    admin: WireClient, alice: WireClient, acls: KafkaAdminClient
) -> None:
    topic = unique("data")
    create_topics(admin, {topic: 1})
    # nothing granted: every data API is refused and nothing changes
    assert end_offset(alice, topic).error_code == E.topic_authorization_failed
    assert produce(alice, topic, [b"x"]).error_code == E.topic_authorization_failed
    assert end_offset(admin, topic).offset == 0
    grant(acls, acl("topic", topic, "WRITE"))
    written = produce(alice, topic, [b"a", b"b", b"c"])
    assert (written.error_code, written.base_offset) == (E.none, 0)
    assert end_offset(alice, topic).offset == 3  # WRITE implies DESCRIBE
    assert fetch(alice, topic).error_code == E.topic_authorization_failed
    assert fetch(alice, topic_id(admin, topic)).error_code == E.topic_authorization_failed
    assert fetch(alice, uuid.uuid4()).error_code == E.unknown_topic_id
    # a follower's fetch needs CLUSTER_ACTION on the cluster, whatever the topic ACLs say
    assert fetch(alice, topic, replica_id=1).error_code == E.topic_authorization_failed
    grant(acls, acl("topic", topic, "READ"))
    read = fetch(alice, topic)
    assert (read.error_code, read.high_watermark) == (E.none, 3) and read.records
    assert fetch(alice, topic_id(admin, topic)).error_code == E.none

    def delete_records(client: WireClient) -> Any:
        topics = [{"name": topic, "partitions": [{"partition_index": 0, "offset": 2}]}]
        return client.call(DELETE_RECORDS, 2, topics=topics, timeout=5000).topics[0].partitions[0]

    assert (delete_records(alice).error_code, delete_records(alice).low_watermark) == (E.topic_authorization_failed, -1)
    assert end_offset(admin, topic, timestamp=-2).offset == 0
    grant(acls, acl("topic", topic, "DELETE"))
    assert (delete_records(alice).error_code, delete_records(alice).low_watermark) == (E.none, 2)
    assert end_offset(admin, topic, timestamp=-2).offset == 2


def test_deny_beats_allow(admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    topic = unique("deny")
    create_topics(admin, {topic: 1})
    grant(acls, acl("topic", topic, "ALL", EVERYONE), acl("topic", topic, "WRITE", ALICE, deny=True))
    assert produce(alice, topic, [b"no"]).error_code == E.topic_authorization_failed
    assert produce(bob, topic, [b"yes"]).error_code == E.none
    assert fetch(alice, topic).error_code == E.none  # only WRITE is denied
    assert end_offset(admin, topic).offset == 1
    # a DENY of ALL denies everything, DESCRIBE included
    grant(acls, acl("topic", topic, "ALL", BOB, deny=True))
    assert metadata(bob, [topic])[topic].error_code == E.topic_authorization_failed
    assert topic not in metadata(bob, None)


def test_kafka_python_producer_and_consumer(server: ServerProcess, admin: WireClient, acls: KafkaAdminClient) -> None:
    topic, group = unique("kp"), unique("kp-group")
    create_topics(admin, {topic: 1})
    bootstrap = f"127.0.0.1:{server.port}"
    # (not idempotent: an idempotent producer with no WRITE anywhere first asks for a producer id, which is
    # refused with CLUSTER_AUTHORIZATION_FAILED, as Kafka refuses it, and that refusal is fatal to the producer)
    plain = KafkaProducer(
        bootstrap_servers=bootstrap, max_block_ms=3000, enable_idempotence=False, **kafka_python("alice")
    )
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            plain.send(topic, b"refused").get(timeout=5)
    finally:
        plain.close(timeout=5)
    grant(acls, acl("topic", topic, "WRITE"))
    # WRITE on a topic lets a producer be idempotent (KIP-679): the default producer asks for an id and gets one
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=3000, **kafka_python("alice"))
    try:
        deadline = time.monotonic() + 10
        while True:  # the producer keeps the refusal in its metadata until it refreshes
            try:
                producer.send(topic, b"hello").get(timeout=5)
                break
            except TopicAuthorizationFailedError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        producer.flush(timeout=5)
    finally:
        producer.close(timeout=5)
    grant(acls, acl("topic", topic, "READ"), acl("group", group, "READ"))
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=8000,
        **kafka_python("alice"),
    )
    try:
        values = []
        for message in consumer:
            values.append(message.value)
            break
        assert values == [b"hello"]
        consumer.commit()
    finally:
        consumer.close()
    assert committed(admin, group, {topic: [0]})[1][(topic, 0)] == (1, E.none)


# ---------------------------------------------------------------------------------------------------- groups
def test_classic_group_apis(admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    prefix = unique("grp")
    group = f"{prefix}-a"
    refused = join(alice, group)
    assert refused.error_code == E.group_authorization_failed
    assert alice.call(SYNC, 3, group_id=group, generation_id=1, member_id="m", group_instance_id=None,
                      assignments=[]).error_code == E.group_authorization_failed  # fmt: skip
    assert alice.call(HEARTBEAT, 3, group_id=group, generation_id=1, member_id="m",
                      group_instance_id=None).error_code == E.group_authorization_failed  # fmt: skip
    left = alice.call(LEAVE, 3, group_id=group, members=[{"member_id": "m", "group_instance_id": None}])
    assert left.error_code == E.group_authorization_failed
    assert group not in groups_listed(admin)  # nothing was created
    grant(acls, acl("group", f"{prefix}-", "READ", prefixed=True))
    member_id = join(alice, group).member_id  # MEMBER_ID_REQUIRED first (v4+)
    joined = join(alice, group, member_id)
    assert joined.error_code == E.none and joined.leader == member_id
    synced = alice.call(SYNC, 3, group_id=group, generation_id=joined.generation_id, member_id=member_id,
                        group_instance_id=None, assignments=[{"member_id": member_id, "assignment": b""}])  # fmt: skip
    assert synced.error_code == E.none
    assert alice.call(HEARTBEAT, 3, group_id=group, generation_id=joined.generation_id, member_id=member_id,
                      group_instance_id=None).error_code == E.none  # fmt: skip
    # DescribeGroups: DESCRIBE per group (READ implies it), KIP-430 operations narrowed to what alice may do
    described = alice.call(DESCRIBE_GROUPS, 5, groups=[group, "grp-other"], include_authorized_operations=True)
    by_id = {g.group_id: g for g in described.groups}
    assert (by_id[group].error_code, by_id[group].group_state) == (E.none, "Stable")
    assert by_id[group].authorized_operations == bits(OP_READ, OP_DESCRIBE)
    assert (by_id["grp-other"].error_code, by_id["grp-other"].authorized_operations) == (
        E.group_authorization_failed, INT32_MIN
    )  # fmt: skip
    hidden = bob.call(DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=True).groups[0]
    assert (hidden.error_code, hidden.members) == (E.group_authorization_failed, ())
    # ListGroups: only the groups the principal may describe (the super user sees every one)
    assert group in groups_listed(alice) and group not in groups_listed(bob) and group in groups_listed(admin)
    # DeleteGroups: DELETE per group; refused, the group is still there
    left = alice.call(LEAVE, 3, group_id=group, members=[{"member_id": member_id, "group_instance_id": None}])
    assert left.error_code == E.none
    deleted = alice.call(DELETE_GROUPS, 2, groups_names=[group]).results[0]
    assert deleted.error_code == E.group_authorization_failed
    assert group in groups_listed(admin)
    grant(acls, acl("group", group, "DELETE"))
    assert alice.call(DELETE_GROUPS, 2, groups_names=[group]).results[0].error_code == E.none
    assert group not in groups_listed(admin)


def test_a_steady_heartbeat_is_authorized_every_time(server: ServerProcess, acls: KafkaAdminClient) -> None:
    """A steady member's heartbeat is answered at once from bytes the server learned (``server/at_once.py``);
    the principal is still checked on every one: the same bytes from a principal without READ, or after the
    ACL is gone, are GROUP_AUTHORIZATION_FAILED."""
    group = unique("steady")
    with signed_in(server.port, "alice") as alice, signed_in(server.port, "bob") as bob:
        with granted(acls, acl("group", group, "READ")):
            member_id = join(alice, group).member_id
            joined = join(alice, group, member_id)
            synced = alice.call(SYNC, 5, group_id=group, generation_id=joined.generation_id, member_id=member_id,
                                group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                assignments=[{"member_id": member_id, "assignment": b""}])  # fmt: skip
            assert synced.error_code == E.none
            fields = {"group_id": group, "generation_id": joined.generation_id, "member_id": member_id,
                      "group_instance_id": None}  # fmt: skip
            frame = encode_request(HEARTBEAT, 4, 7, "steady-client", **fields)
            for _ in range(3):  # the first one's bytes are learned; the next are answered at once
                alice.send_raw(frame)
                assert decode_heartbeat(alice.read_frame()) == E.none
            bob.send_raw(frame)  # the same bytes, another principal
            assert decode_heartbeat(bob.read_frame()) == E.group_authorization_failed
        alice.send_raw(frame)  # the ACL deleted
        assert decode_heartbeat(alice.read_frame()) == E.group_authorization_failed
    # the same for a KIP-848 member's steady ConsumerGroupHeartbeat
    group = unique("steady848")
    with signed_in(server.port, "alice") as alice, signed_in(server.port, "bob") as bob:
        with granted(acls, acl("group", group, "READ")):
            beat = {"group_id": group, "member_id": "alice-member", "instance_id": None, "rack_id": None,
                    "subscribed_topic_regex": None, "server_assignor": None}  # fmt: skip
            joined = alice.call(CG_HEARTBEAT, 1, **beat, member_epoch=0, rebalance_timeout=5_000,
                                subscribed_topic_names=["t"], topic_partitions=[])  # fmt: skip
            assert joined.error_code == E.none
            steady = beat | {"member_epoch": joined.member_epoch, "rebalance_timeout": -1,
                             "subscribed_topic_names": None, "topic_partitions": None}  # fmt: skip
            frame = encode_request(CG_HEARTBEAT, 1, 7, "steady-client", **steady)
            for _ in range(3):
                alice.send_raw(frame)
                assert decode_consumer_heartbeat(alice.read_frame()) == E.none
            bob.send_raw(frame)
            assert decode_consumer_heartbeat(bob.read_frame()) == E.group_authorization_failed
        alice.send_raw(frame)
        assert decode_consumer_heartbeat(alice.read_frame()) == E.group_authorization_failed


def _usual_produce(client: WireClient, topic: str, value: bytes) -> Any:
    """A Produce v9 of one partition from the same producer each time (the same bytes but for the records)."""
    fields = {"transactional_id": None, "acks": -1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": make_batch([value])}]}]}  # fmt: skip
    client.send_raw(encode_request(PRODUCE, 9, 7, "usual-producer", **fields))
    frame = client.read_frame()
    assert frame[:4] == (7).to_bytes(4, "big")
    body, _ = entity_reader(load_response_schema(PRODUCE, 9))(frame, 5)
    return body.responses[0].partition_responses[0]


def test_a_usual_produce_is_authorized_every_time(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under ``--fsync interval`` a Produce of one partition is answered at once from its bytes, its topic,
    acks and the rest learned from the first such request of the producer (``server/at_once.py``); WRITE on the
    Topic is still checked on every one: the same producer's next requests from a principal without it, or
    after the ACL is gone, are TOPIC_AUTHORIZATION_FAILED, and nothing of theirs is appended."""
    for proc in _secured(tmp_path_factory, "--fsync", "interval"):
        admin_client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{proc.port}", **kafka_python("admin"))
        topic = unique("usual")
        with (
            signed_in(proc.port, "admin") as admin,
            signed_in(proc.port, "alice") as alice,
            signed_in(proc.port, "bob") as bob,
        ):
            create_topics(admin, {topic: 1})
            assert _usual_produce(alice, topic, b"refused").error_code == E.topic_authorization_failed
            with granted(admin_client, acl("topic", topic, "WRITE")):
                for n in range(3):  # the first one's remembered part is learned; the next are answered at once
                    written = _usual_produce(alice, topic, b"v%d" % n)
                    assert (written.error_code, written.base_offset) == (E.none, n)
                assert _usual_produce(bob, topic, b"bob's").error_code == E.topic_authorization_failed
            assert _usual_produce(alice, topic, b"after").error_code == E.topic_authorization_failed  # ACL gone
            assert end_offset(admin, topic).offset == 3
        admin_client.close()


def decode_consumer_heartbeat(frame: bytes) -> Any:
    """The error code of a ConsumerGroupHeartbeat v1 answer (response header v1)."""
    assert frame[:4] == (7).to_bytes(4, "big") and frame[4] == 0
    body, _ = entity_reader(load_response_schema(CG_HEARTBEAT, 1))(frame, 5)
    return body.error_code


def decode_heartbeat(frame: bytes) -> Any:
    """The error code of a Heartbeat v4 answer (response header v1: correlation id, no tagged fields)."""
    assert frame[:4] == (7).to_bytes(4, "big") and frame[4] == 0
    return E(int.from_bytes(frame[9:11], "big", signed=True))


def test_consumer_group_apis(admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    group = unique("cg")
    beat = {"group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 10_000, "subscribed_topic_names": [group], "server_assignor": None,
            "topic_partitions": []}  # fmt: skip
    refused = alice.call(CG_HEARTBEAT, 0, **beat)
    assert (refused.error_code, refused.error_message) == (E.group_authorization_failed, "Group authorization failed.")
    assert group not in groups_listed(admin)
    assert (
        alice.call(CG_DESCRIBE, 0, group_ids=[group], include_authorized_operations=True).groups[0].error_code
        == E.group_authorization_failed
    )
    grant(acls, acl("group", group, "READ"))
    joined = alice.call(CG_HEARTBEAT, 0, **beat)
    assert joined.error_code == E.none and joined.member_epoch >= 1
    described = alice.call(CG_DESCRIBE, 0, group_ids=[group], include_authorized_operations=True).groups[0]
    assert (described.error_code, described.authorized_operations) == (E.none, bits(OP_READ, OP_DESCRIBE))
    assert [m.member_id for m in described.members] == [joined.member_id]
    hidden = bob.call(CG_DESCRIBE, 0, group_ids=[group], include_authorized_operations=True).groups[0]
    assert (hidden.error_code, hidden.members) == (E.group_authorization_failed, ())


def test_offset_apis(admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    group, other_group, readable, secret = unique("og"), unique("og-other"), unique("ot-r"), unique("ot-s")
    create_topics(admin, {readable: 1, secret: 1})
    assert commit(bob, group, {(readable, 0): 1}) == {(readable, 0): E.group_authorization_failed}
    assert commit(alice, group, {(readable, 0): 1}) == {(readable, 0): E.group_authorization_failed}
    assert committed(admin, group) == (E.none, {})
    grant(acls, acl("group", group, "READ"), acl("topic", readable, "READ"))
    # READ on the group, READ per topic: the secret topic's partition is refused, the other committed
    assert commit(alice, group, {(readable, 0): 4, (secret, 0): 9}) == {
        (readable, 0): E.none,
        (secret, 0): E.topic_authorization_failed,
    }
    assert commit(alice, group, {("ot-absent", 0): 1}) == {("ot-absent", 0): E.topic_authorization_failed}
    assert commit(admin, group, {(secret, 0): 7}) == {(secret, 0): E.none}
    assert committed(admin, group)[1] == {(readable, 0): (4, E.none), (secret, 0): (7, E.none)}
    # OffsetFetch: named topics without DESCRIBE are refused, fetching all leaves them out
    error, named = committed(alice, group, {readable: [0], secret: [0]})
    assert error == E.none
    assert named == {(readable, 0): (4, E.none), (secret, 0): (-1, E.topic_authorization_failed)}
    assert committed(alice, group) == (E.none, {(readable, 0): (4, E.none)})
    assert committed(bob, group)[0] == E.group_authorization_failed
    batched = alice.call(OFFSET_FETCH, 8, require_stable=False, groups=[
        {"group_id": group, "topics": None}, {"group_id": other_group, "topics": None}])  # fmt: skip
    by_group = {g.group_id: g for g in batched.groups}
    assert by_group[other_group].error_code == E.group_authorization_failed
    assert {t.name for t in by_group[group].topics} == {readable}

    # OffsetDelete: DELETE on the group, then READ per topic
    def delete_offsets() -> Any:
        topics = [{"name": t, "partitions": [{"partition_index": 0}]} for t in (readable, secret)]
        return alice.call(OFFSET_DELETE, 0, group_id=group, topics=topics)

    assert delete_offsets().error_code == E.group_authorization_failed
    grant(acls, acl("group", group, "DELETE"))
    response = delete_offsets()
    assert response.error_code == E.none
    assert {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions} == {
        (readable, 0): E.none,
        (secret, 0): E.topic_authorization_failed,
    }
    assert committed(admin, group)[1] == {(secret, 0): (7, E.none)}


# ------------------------------------------------------------------------------------------------- configs
def test_config_apis(admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    topic, group = unique("cfg"), unique("cfg-group")
    create_topics(admin, {topic: 1})
    refusals = {
        (TOPIC_RESOURCE, topic): (E.topic_authorization_failed, "Topic authorization failed."),
        (GROUP_RESOURCE, group): (E.group_authorization_failed, "Group authorization failed."),
        (BROKER_RESOURCE, "0"): (E.cluster_authorization_failed, "Cluster authorization failed."),
        (BROKER_LOGGER_RESOURCE, "0"): (E.cluster_authorization_failed, "Cluster authorization failed."),
    }
    for (resource_type, name), expected in refusals.items():
        result = describe_configs(bob, resource_type, name)
        assert (result.error_code, result.error_message, result.configs) == (*expected, ()), name
    # AlterConfigs / IncrementalAlterConfigs: refused and unchanged without ALTER_CONFIGS
    assert incremental(alice, TOPIC_RESOURCE, topic, {"retention.ms": "1234"}).error_code == (
        E.topic_authorization_failed
    )
    legacy = alice.call(ALTER_CONFIGS, 2, validate_only=False, resources=[{
        "resource_type": TOPIC_RESOURCE, "resource_name": topic,
        "configs": [{"name": "retention.ms", "value": "1234"}]}]).responses[0]  # fmt: skip
    assert legacy.error_code == E.topic_authorization_failed
    session_key = "consumer.session.timeout.ms"
    before = config_value(admin, GROUP_RESOURCE, group, session_key)
    assert incremental(alice, GROUP_RESOURCE, group, {session_key: "50000"}).error_code == E.group_authorization_failed
    assert incremental(alice, BROKER_LOGGER_RESOURCE, "0", {"regroup": "DEBUG"}).error_code == (
        E.cluster_authorization_failed
    )
    assert config_value(admin, TOPIC_RESOURCE, topic, "retention.ms") != "1234"
    assert config_value(admin, GROUP_RESOURCE, group, session_key) == before
    grant(acls, acl("topic", topic, "ALTER_CONFIGS"), acl("group", group, "ALTER_CONFIGS"))
    assert incremental(alice, TOPIC_RESOURCE, topic, {"retention.ms": "1234"}).error_code == E.none
    assert incremental(alice, GROUP_RESOURCE, group, {session_key: "50000"}).error_code == E.none
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert {c.name: c.value for c in describe_configs(alice, TOPIC_RESOURCE, topic).configs}["retention.ms"] == "1234"
    assert config_value(alice, GROUP_RESOURCE, group, session_key) == "50000"
    legacy = alice.call(ALTER_CONFIGS, 2, validate_only=False, resources=[{
        "resource_type": TOPIC_RESOURCE, "resource_name": topic,
        "configs": [{"name": "retention.ms", "value": "4321"}]}]).responses[0]  # fmt: skip
    assert legacy.error_code == E.none
    assert config_value(admin, TOPIC_RESOURCE, topic, "retention.ms") == "4321"
    assert describe_configs(alice, BROKER_RESOURCE, "0").error_code == E.cluster_authorization_failed


# ---------------------------------------------------------------------------------------------- transactions
def test_transaction_apis(admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    tid, group = unique("tx"), unique("tx-group")
    writable, other = unique("tx-w"), unique("tx-o")
    create_topics(admin, {writable: 1, other: 1})
    # InitProducerId: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    # cluster or (KIP-679) WRITE on some topic
    assert init_pid(alice, tid).error_code == E.transactional_id_authorization_failed
    assert init_pid(bob, None).error_code == E.cluster_authorization_failed
    grant(acls, acl("topic", unique("bob-w") + "-", "WRITE", BOB, prefixed=True))
    assert init_pid(bob, None).error_code == E.none
    grant(acls, acl("txn", tid, "WRITE"), acl("topic", writable, "WRITE"))
    started = init_pid(alice, tid)
    assert started.error_code == E.none
    pid, epoch = started.producer_id, started.producer_epoch
    # AddPartitionsToTxn: a topic without WRITE fails the whole transaction
    assert add_partitions(alice, tid, pid, epoch, {writable: [0], other: [0]}) == {
        (writable, 0): E.operation_not_attempted,
        (other, 0): E.topic_authorization_failed,
    }
    assert add_partitions(bob, tid, pid, epoch, {writable: [0]}) == {
        (writable, 0): E.transactional_id_authorization_failed
    }
    batched = alice.call(ADD_PARTITIONS, 4, transactions=[{"transactional_id": tid, "producer_id": pid,
        "producer_epoch": epoch, "verify_only": True, "topics": [{"name": writable, "partitions": [0]}]}])  # fmt: skip
    assert batched.error_code == E.cluster_authorization_failed  # the brokers' form needs CLUSTER_ACTION
    assert add_partitions(alice, tid, pid, epoch, {writable: [0]}) == {(writable, 0): E.none}
    # a transactional produce needs WRITE on its transactional id
    batch = make_batch([b"t"], producer_id=pid, producer_epoch=epoch, base_sequence=0, attributes=0x10)
    assert produce(bob, writable, [], tid=tid, batch=batch).error_code == E.transactional_id_authorization_failed
    assert produce(alice, writable, [], tid=tid, batch=batch).error_code == E.none
    # AddOffsetsToTxn and TxnOffsetCommit: WRITE on the transactional id, READ on the group, READ per topic
    add_offsets = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": group}
    assert bob.call(ADD_OFFSETS, 3, **add_offsets).error_code == E.transactional_id_authorization_failed
    assert alice.call(ADD_OFFSETS, 3, **add_offsets).error_code == E.group_authorization_failed
    grant(acls, acl("group", group, "READ"), acl("topic", writable, "READ"))
    assert alice.call(ADD_OFFSETS, 3, **add_offsets).error_code == E.none

    def txn_commit(client: WireClient) -> dict[tuple[str, int], Any]:
        topics = [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                               "committed_metadata": ""}]} for t in (writable, other)]  # fmt: skip
        response = client.call(TXN_OFFSET_COMMIT, 3, transactional_id=tid, group_id=group, producer_id=pid,
                               producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
                               topics=topics)  # fmt: skip
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    assert set(txn_commit(bob).values()) == {E.transactional_id_authorization_failed}
    assert txn_commit(alice) == {(writable, 0): E.none, (other, 0): E.topic_authorization_failed}
    # the tools' views
    described = bob.call(DESCRIBE_TXNS, 0, transactional_ids=[tid]).transaction_states[0]
    assert described.error_code == E.transactional_id_authorization_failed
    mine = alice.call(DESCRIBE_TXNS, 0, transactional_ids=[tid]).transaction_states[0]
    assert (mine.error_code, mine.transaction_state) == (E.none, "Ongoing")
    assert [t.topic for t in mine.topics] == [writable]
    listed = {s.transactional_id for s in alice.call(LIST_TXNS, 0, state_filters=[], producer_id_filters=[])
              .transaction_states}  # fmt: skip
    assert tid in listed
    assert tid not in {s.transactional_id for s in bob.call(LIST_TXNS, 0, state_filters=[], producer_id_filters=[])
                       .transaction_states}  # fmt: skip
    producers = {"topics": [{"name": writable, "partition_indexes": [0]}]}
    refused = bob.call(DESCRIBE_PRODUCERS, 0, **producers).topics[0].partitions[0]
    assert (refused.error_code, refused.active_producers) == (E.topic_authorization_failed, ())
    active = alice.call(DESCRIBE_PRODUCERS, 0, **producers).topics[0].partitions[0]
    assert active.error_code == E.none and [p.producer_id for p in active.active_producers] == [pid]
    # EndTxn
    end = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    assert bob.call(END_TXN, 3, **end).error_code == E.transactional_id_authorization_failed
    assert committed(admin, group, {writable: [0]})[1][(writable, 0)][0] == -1  # still pending
    assert alice.call(END_TXN, 3, **end).error_code == E.none
    assert committed(admin, group, {writable: [0]})[1][(writable, 0)][0] == 1


# -------------------------------------------------------------------------------------------------- cluster
def test_describe_topic_partitions(admin: WireClient, alice: WireClient, acls: KafkaAdminClient) -> None:
    seen, hidden = unique("dtp-seen"), unique("dtp-hidden")
    create_topics(admin, {seen: 2, hidden: 1})
    grant(acls, acl("topic", seen, "READ"))

    def described(names: list[str]) -> dict[str, Any]:
        response = alice.call(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[{"name": n} for n in names],
                              response_partition_limit=2000, cursor=None)  # fmt: skip
        return {t.name: t for t in response.topics}

    named = described([seen, hidden])
    assert (named[seen].error_code, len(named[seen].partitions)) == (E.none, 2)
    assert named[seen].topic_authorized_operations == bits(OP_READ, OP_DESCRIBE)
    assert (named[hidden].error_code, named[hidden].topic_id, named[hidden].partitions) == (
        E.topic_authorization_failed, NO_ID, ()
    )  # fmt: skip
    everything = described([])
    assert seen in everything and hidden not in everything


API_VERSIONS, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_SCRAM, ALTER_SCRAM = 18, 29, 30, 31, 50, 51
ACL_FILTER_ALL = {
    "resource_type_filter": 1,  # ANY
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}


def test_share_group_apis(admin: WireClient, alice: WireClient, acls: KafkaAdminClient) -> None:
    """READ on the group for the heartbeat, ShareFetch, ShareAcknowledge and AlterShareGroupOffsets, DESCRIBE on
    the group (implied by READ) for the describes, DELETE for DeleteShareGroupOffsets, DESCRIBE on a subscribed
    topic, READ on a fetched topic; each refusal is Kafka's error and changes nothing, and with the ACLs the
    same requests succeed."""
    group, topic, member = unique("az"), unique("az-t"), share.member_id()
    tid = share.new_topic(admin, topic)
    tp = (tid, 0)
    share.set_group_config(admin, group, "share.auto.offset.reset", "earliest")
    share.produce(admin, topic, make_batch([b"a", b"b", b"c"]))

    # nothing granted: every share API is refused for the group
    assert share.heartbeat(alice, group, member, 0, [topic]).error_code == E.group_authorization_failed
    assert share.share_fetch(alice, group, member, 0, {tp: []}).error_code == E.group_authorization_failed
    assert share.share_ack(alice, group, member, 1, {tp: share.batches((0, 0, share.ACCEPT))}).error_code == (
        E.group_authorization_failed
    )
    assert share.alter_offsets(alice, group, topic, {0: 1}).error_code == E.group_authorization_failed
    assert share.delete_offsets(alice, group, [topic]).error_code == E.group_authorization_failed
    assert share.described(alice, group).error_code == E.group_authorization_failed
    assert share.share_offsets(alice, group) == (E.group_authorization_failed, {})
    assert share.described(admin, group).error_code == E.group_id_not_found
    assert group not in share.listed(admin, [])

    # READ on the group: the subscribed topic needs DESCRIBE, the fetched one READ
    grant(acls, acl("group", group, "READ"))
    topic_refused = share.heartbeat(alice, group, member, 0, [topic])
    assert (topic_refused.error_code, topic_refused.assignment) == (E.topic_authorization_failed, None)
    assert share.described(admin, group).error_code == E.group_id_not_found
    assert share.share_fetch(alice, group, member, 1, {}).error_code == E.share_session_not_found  # none was opened
    refused = share.fetched(share.share_fetch(alice, group, member, 0, {tp: []}))[tp]
    assert (refused.error_code, share.ranges(refused), refused.records) == (E.topic_authorization_failed, [], b"")
    assert share.delete_offsets(alice, group, [topic]).error_code == E.group_authorization_failed  # READ is not DELETE

    grant(acls, acl("topic", topic, "DESCRIBE"))
    joined = share.heartbeat(alice, group, member, 0, [topic])
    assert (joined.error_code, joined.member_epoch, share.assignment(joined)) == (E.none, 1, {tid: [0]})
    still = share.fetched(share.share_fetch(alice, group, member, 0, {tp: []}))[tp]  # DESCRIBE is not READ
    assert (still.error_code, share.ranges(still)) == (E.topic_authorization_failed, [])
    assert share.share_offsets(admin, group) == (E.none, {(topic, 0): (0, 3, E.none)})

    grant(acls, acl("topic", topic, "READ"))
    got = share.fetched(share.share_fetch(alice, group, member, 0, {tp: []}, max_wait_ms=2000))[tp]
    assert (got.error_code, share.ranges(got)) == (E.none, [(0, 2, 1)])
    assert share.acked(share.share_ack(alice, group, member, 1, {tp: share.batches((0, 2, share.ACCEPT))})) == {
        tp: E.none
    }
    assert share.heartbeat(alice, group, member, -1).error_code == E.none
    assert share.share_offsets(admin, group) == (E.none, {(topic, 0): (3, 0, E.none)})
    assert share.alter_offsets(alice, group, topic, {0: 1}).error_code == E.none
    assert share.share_offsets(admin, group) == (E.none, {(topic, 0): (1, 2, E.none)})

    # DELETE on the group for DeleteShareGroupOffsets; DESCRIBE on it for the describes
    assert share.delete_offsets(alice, group, [topic]).error_code == E.group_authorization_failed
    assert share.share_offsets(admin, group) == (E.none, {(topic, 0): (1, 2, E.none)})
    grant(acls, acl("group", group, "DELETE"))
    deleted = share.delete_offsets(alice, group, [topic])
    assert (deleted.error_code, [(t.topic_name, t.error_code) for t in deleted.responses]) == (
        E.none,
        [(topic, E.none)],
    )
    assert share.share_offsets(admin, group, {topic: [0]}) == (E.none, {(topic, 0): (-1, -1, E.none)})
    # (READ on the group implies DESCRIBE, as in Kafka: the describes are allowed now)
    assert (share.described(alice, group).error_code, share.described(alice, group).group_state) == (E.none, "Empty")
    assert share.share_offsets(alice, group, {topic: [0]}) == (E.none, {(topic, 0): (-1, -1, E.none)})


def scram_upsertion(user: str) -> dict[str, Any]:
    from regroup.security.scram import SCRAM_SHA_512, salted_password

    salt = b"matrix-salt-0001"
    return {
        "name": user,
        "mechanism": SCRAM_SHA_512.type_code,
        "iterations": 4096,
        "salt": salt,
        "salted_password": salted_password(SCRAM_SHA_512, "matrix-pw", salt, 4096),
    }


def acl_creation(name: str) -> dict[str, Any]:
    return {
        "resource_type": 2,  # TOPIC
        "resource_name": name,
        "resource_pattern_type": 3,  # LITERAL
        "principal": "User:carol",
        "host": "*",
        "operation": OP_READ,
        "permission_type": 3,  # ALLOW
    }


def test_acl_and_scram_apis_need_the_cluster(admin: WireClient, bob: WireClient, acls: KafkaAdminClient) -> None:
    """ApiVersions needs nothing; DescribeAcls and DescribeUserScramCredentials DESCRIBE on the cluster;
    CreateAcls, DeleteAcls and AlterUserScramCredentials ALTER on it. Refused, nothing changes."""
    assert bob.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1").error_code == E.none
    name = unique("acl-api")

    def acls_now() -> list[tuple[str, str]]:
        found = admin.call(DESCRIBE_ACLS, 3, **ACL_FILTER_ALL)
        return sorted((r.resource_name, a.principal) for r in found.resources for a in r.acls)

    def users_now() -> list[str]:
        return sorted(u.user for u in admin.call(DESCRIBE_SCRAM, 0, users=None).results)

    before_acls, before_users = acls_now(), users_now()
    refused = E.cluster_authorization_failed
    assert bob.call(DESCRIBE_ACLS, 3, **ACL_FILTER_ALL).error_code == refused
    assert [r.error_code for r in bob.call(CREATE_ACLS, 3, creations=[acl_creation(name)]).results] == [refused]
    deleted = bob.call(DELETE_ACLS, 3, filters=[ACL_FILTER_ALL])
    assert [r.error_code for r in deleted.filter_results] == [refused]
    assert bob.call(DESCRIBE_SCRAM, 0, users=None).error_code == refused
    altered = bob.call(ALTER_SCRAM, 0, deletions=[], upsertions=[scram_upsertion("carol")])
    assert [r.error_code for r in altered.results] == [refused]
    assert (acls_now(), users_now()) == (before_acls, before_users)  # refused: nothing changed

    with granted(acls, acl("cluster", "kafka-cluster", "ALTER", BOB)):  # ALTER implies DESCRIBE
        assert bob.call(DESCRIBE_ACLS, 3, **ACL_FILTER_ALL).error_code == E.none
        assert [r.error_code for r in bob.call(CREATE_ACLS, 3, creations=[acl_creation(name)]).results] == [E.none]
        assert (name, "User:carol") in acls_now()
        removed = bob.call(
            DELETE_ACLS,
            3,
            filters=[{**ACL_FILTER_ALL, "resource_type_filter": 2, "resource_name_filter": name,
                      "pattern_type_filter": 3}],
        )  # fmt: skip
        assert [r.error_code for r in removed.filter_results] == [E.none]
        assert (name, "User:carol") not in acls_now()
        assert bob.call(DESCRIBE_SCRAM, 0, users=None).error_code == E.none
        altered = bob.call(ALTER_SCRAM, 0, deletions=[], upsertions=[scram_upsertion("carol")])
        assert [r.error_code for r in altered.results] == [E.none]
        assert "carol" in users_now()
        gone = bob.call(ALTER_SCRAM, 0, deletions=[{"name": "carol", "mechanism": 2}], upsertions=[])
        assert [r.error_code for r in gone.results] == [E.none]
    assert (acls_now(), users_now()) == (before_acls, before_users)


def test_cluster_operations_and_wildcards(
    admin: WireClient, alice: WireClient, bob: WireClient, acls: KafkaAdminClient
) -> None:
    """Runs last in the module: its ACLs reach every topic and the cluster (and are deleted at the end)."""
    asked = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    # DescribeCluster is answered to anyone (as Kafka does); the operations say what the principal may do
    plain = bob.call(DESCRIBE_CLUSTER, 1, **asked)
    assert (plain.error_code, plain.cluster_authorized_operations, len(plain.brokers)) == (E.none, 0, 1)
    topic, denied = unique("wild"), unique("wild-deny")
    create_topics(admin, {topic: 1, denied: 1})
    produce(admin, topic, [b"w"])
    produce(admin, denied, [b"w"])
    assert fetch(bob, topic).error_code == E.topic_authorization_failed
    with granted(
        acls,
        acl("cluster", "kafka-cluster", "DESCRIBE", BOB),
        acl("topic", "*", "READ", BOB),  # the wildcard name: every topic
        acl("topic", denied, "READ", BOB, deny=True),
        acl("cluster", "kafka-cluster", "ALTER_CONFIGS", BOB),
    ):
        assert bob.call(DESCRIBE_CLUSTER, 1, **asked).cluster_authorized_operations == bits(
            OP_DESCRIBE, OP_ALTER_CONFIGS, OP_DESCRIBE_CONFIGS
        )
        # the broker's configuration: ALTER_CONFIGS on the cluster (which implies DESCRIBE_CONFIGS)
        assert describe_configs(bob, BROKER_RESOURCE, "0").error_code == E.none
        assert incremental(bob, BROKER_RESOURCE, "0", {}).error_code == E.none
        assert fetch(bob, topic).error_code == E.none
        assert fetch(bob, denied).error_code == E.topic_authorization_failed  # DENY beats the wildcard ALLOW
        assert topic in metadata(bob, None)
        assert groups_listed(bob) == groups_listed(admin)  # DESCRIBE on the cluster lists every group
    assert fetch(bob, topic).error_code == E.topic_authorization_failed
    assert bob.call(DESCRIBE_CLUSTER, 1, **asked).cluster_authorized_operations == 0
    assert describe_configs(bob, BROKER_RESOURCE, "0").error_code == E.cluster_authorization_failed
    assert incremental(bob, BROKER_RESOURCE, "0", {}).error_code == E.cluster_authorization_failed

"""Metadata, CreateTopics and DeleteTopics over the embedded topic store (one broker: node 0, the controller).

Versions (all kio ships): Metadata v0–v13 (topic ids in answers from v10, lookups by id from v12, as in
Kafka), CreateTopics v2–v7, DeleteTopics v1–v6 (by id from v6). Every partition is led by
node 0 with replicas = ISR = [0] and leader epoch -1 ("unknown", so clients skip KIP-320 epoch validation).
Metadata auto-creates a missing topic with ``broker.default_partitions`` when the broker allows it and the
client asks (``allow_auto_topic_creation``, v4+; always before v4), and then answers with the new topic at once
(Kafka answers LEADER_NOT_AVAILABLE first; clients retry on either); the topics a request creates are written
together on the store's worker thread, not on the event loop. A CreateTopics asking for more than 10,000
partitions in all is refused whole with POLICY_VIOLATION, as Kafka's controller refuses it; within that, the
store's limits (``--max-partitions-per-topic``, ``--max-partitions``) apply per topic. Metadata v8+ reports
the topics' (and, v8–v10, the cluster's) authorized operations when asked (KIP-430): those the principal may
do, every one without an authorizer.

Authorization, as Kafka checks it (``KafkaApis.handleTopicMetadataRequest``, the controller's ``ControllerApis``):

- **Metadata**: a topic is described only with DESCRIBE on it. Asking for all topics leaves the others out
  silently; a topic asked for by name without DESCRIBE is TOPIC_AUTHORIZATION_FAILED with a zero topic id
  (whether or not it exists: its existence is not disclosed), one asked for by id is TOPIC_AUTHORIZATION_FAILED
  with a null name (ids are not secret; an unknown id is UNKNOWN_TOPIC_ID). Auto-creation of a missing topic
  needs CREATE on the Cluster or on the Topic, else TOPIC_AUTHORIZATION_FAILED and nothing is created. The
  cluster's authorized operations are 0 without DESCRIBE on the Cluster; refused topics carry none.
- **CreateTopics**: CREATE on the Cluster, or else on each Topic: a topic without it is TOPIC_AUTHORIZATION_FAILED
  ("Authorization failed.") after the duplicate check and before any other, is not created and does not count
  towards the request's partition bound. A topic created without DESCRIBE_CONFIGS on it is answered without
  its configurations, partition count and replication factor, and with ``topic_config_error_code``
  TOPIC_AUTHORIZATION_FAILED (v5+).
- **DeleteTopics**: DELETE on the Cluster, or else on each Topic. By name: without DESCRIBE on it the topic is
  TOPIC_AUTHORIZATION_FAILED (its existence not disclosed); an unknown one UNKNOWN_TOPIC_OR_PARTITION; without
  DELETE TOPIC_AUTHORIZATION_FAILED. By id: an unknown id is UNKNOWN_TOPIC_ID; without DELETE the topic is
  TOPIC_AUTHORIZATION_FAILED, with its name only when the principal may DESCRIBE it.

Large requests never hold the event loop for long, and no CreateTopics writes a file on it (a topic's directory, its
``topic.json`` and their fsyncs cost 1–2 ms under ``--fsync always``, more on a slower disk: 10 topics in one step
held the loop 15 ms, and even one topic waited for its fsyncs there). A CreateTopics checks what concerns the whole
request first (duplicates, authorization, Kafka's bound on partitions per request), then each topic, ``CHECK_SLICE``
topics per turn of the loop, reserving each name it will create as it is checked (``TopicStore.reserve_topic``; a
topic is checked and reserved in one turn, so a concurrent request either sees the reservation or came first): a
CreateTopics of a reserved name from another connection gets TOPIC_ALREADY_EXISTS, as in Kafka, and Metadata does
not show it (UNKNOWN_TOPIC_OR_PARTITION, or LEADER_NOT_AVAILABLE where it would auto-create it: Kafka's answer for a
topic being created). The directories are then written in chunks of ``CREATE_CHUNK`` on the topic store's worker
thread, each chunk registered on the loop when written (one new cluster image per chunk); a topic whose writing
fails (``OSError``) is answered UNKNOWN_SERVER_ERROR, the others are unaffected. A DeleteTopics, of any size,
deletes ``DELETE_CHUNK`` topics per turn of the loop (each a rename; the coordinator gets one new cluster image when
all are done), closes their logs in slices without fsyncing them, makes the renames durable and removes the files on
the worker thread. Either answer is built and encoded ``ANSWER_SLICE`` topics per turn. validate_only requests
write nothing.

Also home of the small helpers the data handlers share: building a kio response entity of the request's
version from keyword values (fields a version lacks are dropped) and reaching the concrete topic store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import importlib
import io
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import CLUSTER_ID, NODE_ID, ZERO_UUID, ApiSpec, Broker, RequestContext, TopicInfo, broker_rack
from regroup.server.authz import allowed, authorizer_of, decisions_stamp
from regroup.server.config_view import Described, describe_topic, topic_configs_of_request
from regroup.server.encoded import PreEncoded, splice, splice_pieces
from regroup.server.handlers.authorized import (
    CLUSTER_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized_operations,
)
from regroup.server.topic_answers import TopicAnswers, answers_of
from regroup.server.topic_entries import EntryFormat, format_for
from regroup.server.topics import InvalidTopicError, NewTopic, PartitionLimitError, TopicExistsError, TopicStore
from regroup.storage.topic_config import ConfigError

__all__ = [
    "METADATA_PARTITION",
    "NO_THROTTLE",
    "SPECS",
    "ZERO_UUID",
    "build",
    "handle_create_topics",
    "handle_delete_topics",
    "handle_metadata",
    "response_module",
    "store_of",
]

log = logging.getLogger(__name__)

NO_THROTTLE = datetime.timedelta(0)
#: topics of a large CreateTopics checked and reserved per turn of the event loop (about 12 µs a topic)
CHECK_SLICE = 100
#: topics written per job of the topic store's worker thread (and registered together: one cluster image)
CREATE_CHUNK = 200
#: topics a DeleteTopics deletes per turn of the event loop
DELETE_CHUNK = 50
#: topic results built and encoded per turn of the event loop
ANSWER_SLICE = 100
#: Kafka's controller refuses a CreateTopics asking for more partitions than this in all (POLICY_VIOLATION)
MAX_PARTITIONS_PER_REQUEST = 10_000
UNAUTHORIZED = ErrorCode.topic_authorization_failed


# ---------------------------------------------------------------------- shared helpers


def may(broker: Broker, ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    """May the request's principal do ``operation`` on the Topic ``topic``?"""
    return allowed(broker, ctx, operation, ResourceType.TOPIC, topic)


def may_on_cluster(broker: Broker, ctx: RequestContext, operation: AclOperation) -> bool:
    """May the request's principal do ``operation`` on the Cluster?"""
    return allowed(broker, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def response_module(request: object) -> ModuleType:
    """The kio module of the response entities matching ``request``'s API and version."""
    module = type(request).__module__
    if not module.endswith(".request"):
        raise TypeError(f"not a kio request entity: {request!r}")
    return _response_module(module)


@functools.cache
def _response_module(request_module: str) -> ModuleType:
    return importlib.import_module(request_module.removesuffix(".request") + ".response")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(module: ModuleType, entity: str, **values: Any) -> Any:
    """``module.<entity>(**values)`` keeping only the fields this version has (so one call serves all)."""
    cls = getattr(module, entity)
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def store_of(broker: Broker) -> TopicStore:
    """The broker's topic store, which must be :class:`regroup.server.topics.TopicStore`."""
    store = broker.topic_store
    if not isinstance(store, TopicStore):
        raise TypeError(f"the data handlers need regroup.server.topics.TopicStore, not {type(store).__name__}")
    return store


# ---------------------------------------------------------------------- Metadata

#: every partition as Metadata describes it (but its index): led by node 0, replicas = ISR = [0], epoch unknown
METADATA_PARTITION: dict[str, Any] = {
    "error_code": ErrorCode.none,
    "leader_id": NODE_ID,
    "leader_epoch": -1,
    "replica_nodes": (NODE_ID,),
    "isr_nodes": (NODE_ID,),
    "offline_replicas": (),
}


async def handle_metadata(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Topic; auto-creation: CREATE on the Cluster or the Topic; cluster operations: DESCRIBE
    on the Cluster.

    Answered from the store's cached topic entries (``server/topic_answers.py``): an existing topic's entry is
    encoded once per encoding and reused until the topic changes, an all-topics answer is one array kept
    until the topics (or the ACLs) change; only error entries are encoded per request."""
    mod = response_module(request)
    store = store_of(broker)
    answers = answers_of(store)
    fmt = format_for(mod.MetadataResponseTopic, mod.MetadataResponsePartition, METADATA_PARTITION)
    version = ctx.api_version
    with_ops = version >= 8 and request.include_topic_authorized_operations
    errors: list[int] = []
    if request.topics is None or (version == 0 and not request.topics):
        count, entries = await _all_topics(broker, ctx, answers, fmt, with_ops)
    else:
        await _create_missing(broker, ctx, store, request)
        with store.batched():  # topics auto-created: one new cluster image
            pieces = _named_topics(broker, ctx, request, answers, fmt, with_ops, errors)
        count, entries = len(pieces), b"".join(pieces)
    cluster_operations = NOT_REQUESTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = (
            authorized_operations(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
            if may_on_cluster(broker, ctx, AclOperation.DESCRIBE)
            else 0
        )
    host, port = broker.endpoint(ctx.listener)
    node = build(mod, "MetadataResponseBroker", node_id=NODE_ID, host=host, port=port, rack=broker_rack(broker))
    skeleton = build(
        mod,
        "MetadataResponse",
        throttle_time=NO_THROTTLE,
        brokers=(node,),
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        topics=(),
        error_code=ErrorCode.none,
        cluster_authorized_operations=cluster_operations,
    )
    return PreEncoded(type(skeleton), splice_pieces(skeleton, "topics", count, entries), tuple(errors))


#: topics an all-topics Metadata answer authorizes between two yields to the loop, with an authorizer (each one
#: a DESCRIBE and, with its authorized operations, seven more decisions: 11,000 topics held the loop 16 ms for a
#: super user, several times that for a principal whose ACLs are looked at)
AUTHORIZED_TOPICS_PER_TURN = 500


async def _all_topics(
    broker: Broker, ctx: RequestContext, answers: TopicAnswers, fmt: EntryFormat, with_ops: bool
) -> tuple[int, bytes]:
    """(how many, the entries of) every topic the principal may DESCRIBE, by name: one array remembered until
    the topics change, per encoding and, with an authorizer, per principal and host until the ACLs change;
    made with ``AUTHORIZED_TOPICS_PER_TURN`` topics authorized between two yields to the loop. (Made while the
    topics or the ACLs change, it answers each topic as it was when reached, and is remembered under the
    topics' generation and the ACLs' stamp read before it began: never served again once either changed.)"""
    filtered = authorizer_of(broker) is not None
    stamp = decisions_stamp(broker)
    key = (fmt, with_ops, ctx.principal, ctx.client_host) if filtered else (fmt, with_ops)
    if stamp is not None:
        found = answers.remembered(key, stamp)
        if found is not None:
            return found
    generation = answers.generation
    tail = fmt.tail(TOPIC_OPERATIONS if with_ops else NOT_REQUESTED)
    pieces: list[bytes] = []
    # (with an authorizer it yields, so it walks a copy: the topics may change meanwhile)
    topics = list(answers.by_name()) if filtered else answers.by_name()
    for index, info in enumerate(topics):
        if not filtered:
            pieces += (answers.body(fmt, info), tail)
            continue
        if index and not index % AUTHORIZED_TOPICS_PER_TURN:
            await asyncio.sleep(0)
        if may(broker, ctx, AclOperation.DESCRIBE, info.name):
            own = fmt.tail(_topic_operations(broker, ctx, info.name)) if with_ops else tail
            pieces += (answers.body(fmt, info), own)
    count, data = len(pieces) // 2, b"".join(pieces)
    if stamp is not None:
        answers.remember(key, generation, stamp, count, data)
    return count, data


def _named_topics(
    broker: Broker,
    ctx: RequestContext,
    request: Any,
    answers: TopicAnswers,
    fmt: EntryFormat,
    with_ops: bool,
    errors: list[int],
) -> list[bytes]:
    """The entries of the topics ``request`` names, in its order (each once), auto-creating missing ones where
    allowed; the error codes of error entries are added to ``errors``."""
    store = store_of(broker)
    version = ctx.api_version
    auto = broker.auto_create_topics and getattr(request, "allow_auto_topic_creation", True)
    seen: set[object] = set()
    pieces: list[bytes] = []
    for wanted in request.topics:
        topic_id = getattr(wanted, "topic_id", None) if version >= 12 else None  # ids: v12+ (as in Kafka)
        key = wanted.name if wanted.name is not None else topic_id
        if key in seen:
            continue
        seen.add(key)
        found: TopicInfo | _TopicError
        if wanted.name is None and version < 12:
            found = _TopicError("", ErrorCode.invalid_request)
        else:
            found = _lookup(store, broker, ctx, wanted.name, topic_id, auto)
        if isinstance(found, TopicInfo):
            operations = _topic_operations(broker, ctx, found.name) if with_ops else NOT_REQUESTED
            pieces.append(answers.body(fmt, found) + fmt.tail(operations))
            continue
        operations = NOT_REQUESTED
        if with_ops and found.name is not None and found.code != UNAUTHORIZED:
            operations = _topic_operations(broker, ctx, found.name)
        entry = {"error_code": found.code, "name": found.name, "topic_id": found.topic_id or ZERO_UUID}
        pieces.append(fmt.encode(**entry, partitions=(), topic_authorized_operations=operations))
        errors.append(found.code)
    return pieces


async def _create_missing(broker: Broker, ctx: RequestContext, store: TopicStore, request: Any) -> None:
    """Auto-create the missing topics ``request`` names that the principal may create, their directories written
    on the store's worker thread (``TopicStore.create_reserved``) rather than on the event loop: a topic's
    directories and their fsyncs, a millisecond or more each, 500 topics named at once held the loop 300 ms. A
    name refused here (not a valid name, a collision, over a limit) is left to ``_lookup``, which answers its
    error as it always did; so is one whose directories could not be written."""
    if not (broker.auto_create_topics and getattr(request, "allow_auto_topic_creation", True)):
        return
    reserved: list[NewTopic] = []
    wanted: set[str] = set()
    for topic in request.topics:
        name = topic.name
        if name is None or name in wanted or store.topic(name) is not None or store.is_reserved(name):
            continue
        wanted.add(name)
        if not may(broker, ctx, AclOperation.DESCRIBE, name):
            continue
        if not (may_on_cluster(broker, ctx, AclOperation.CREATE) or may(broker, ctx, AclOperation.CREATE, name)):
            continue
        try:
            reserved.append(store.reserve_topic(name, broker.default_partitions))
        except (InvalidTopicError, TopicExistsError, PartitionLimitError):
            continue
    if reserved:
        await store.create_reserved(reserved)  # (which releases the names, even if this request is cancelled)


def _topic_operations(broker: Broker, ctx: RequestContext, name: str) -> int:
    return authorized_operations(broker, ctx, ResourceType.TOPIC, name, TOPIC_OPERATIONS)


@dataclasses.dataclass(frozen=True, slots=True)
class _TopicError:
    """A Metadata topic entry that is an error: the name and id it shows (each may be withheld) and the code."""

    name: str | None
    code: ErrorCode
    topic_id: uuid.UUID | None = None


def _lookup(
    store: TopicStore,
    broker: Broker,
    ctx: RequestContext,
    name: str | None,
    topic_id: uuid.UUID | None,
    auto: bool,
) -> TopicInfo | _TopicError:
    if name is None:
        info = store.topic_by_id(topic_id) if topic_id is not None else None
        if info is None:
            return _TopicError(None, ErrorCode.unknown_topic_id, topic_id)
        if not may(broker, ctx, AclOperation.DESCRIBE, info.name):
            return _TopicError(None, UNAUTHORIZED, topic_id)
        return info
    if not may(broker, ctx, AclOperation.DESCRIBE, name):
        return _TopicError(name, UNAUTHORIZED)
    info = store.topic(name)
    if info is None and auto:
        if not (may_on_cluster(broker, ctx, AclOperation.CREATE) or may(broker, ctx, AclOperation.CREATE, name)):
            return _TopicError(name, UNAUTHORIZED)
        if store.is_reserved(name):  # a CreateTopics is creating it: Kafka's answer for a topic being created
            return _TopicError(name, ErrorCode.leader_not_available)
        try:
            info = store.create_topic(name, broker.default_partitions)
        except InvalidTopicError:
            return _TopicError(name, ErrorCode.invalid_topic_exception)
        except TopicExistsError:  # '.'/'_' collision with an existing topic
            return _TopicError(name, ErrorCode.invalid_topic_exception)
        except PartitionLimitError as exc:
            return _TopicError(name, exc.code)
    if info is None:
        return _TopicError(name, ErrorCode.unknown_topic_or_partition)
    return info


def _topic_error(mod: ModuleType, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None) -> Any:
    return build(
        mod, "MetadataResponseTopic", error_code=code, name=name, topic_id=topic_id or ZERO_UUID, partitions=()
    )


# ---------------------------------------------------------------------- CreateTopics


async def handle_create_topics(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """CREATE on the Cluster or on each Topic; DESCRIBE_CONFIGS on a Topic to see its configuration."""
    return await _create_topics(broker, ctx, request)


async def _create_topics(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """A CreateTopics, of any size: checked and reserved in one step, written in chunks on the topic store's
    worker thread and registered chunk by chunk, answered in slices (see the module doc)."""
    mod = response_module(request)
    store = store_of(broker)
    named, creatable, too_many = _screen(broker, ctx, request)
    if too_many:
        refusals = [functools.partial(_too_many, mod, t.name, creatable) for t in request.topics]
        return await _answer_in_slices(mod, "CreateTopicsResponse", "topics", refusals)
    answers: list[Callable[[], Any]] = []
    described = _DescribedConfigs(mod, store)
    reserved: list[NewTopic] = []
    accepted: dict[str, tuple[TopicInfo, dict[str, str]]] = {}  # validate_only: what would be created
    outcomes: dict[str, TopicInfo | OSError] = {}
    submitted = 0  # reserved[:submitted] were handed to the store (which releases them)
    try:
        for i, topic in enumerate(request.topics):  # step 1: the checks, as a small request's; the reservations
            if i and not i % CHECK_SLICE:
                await asyncio.sleep(0)
            name = topic.name
            checked = _check_topic(store, topic, named, creatable, broker.default_partitions)
            if not isinstance(checked, _Verdict) and not request.validate_only:
                try:
                    reserved.append(store.reserve_topic(name, *checked))
                except (InvalidTopicError, TopicExistsError, PartitionLimitError) as exc:  # (checked just now)
                    checked = _refusal(exc)
            if isinstance(checked, _Verdict):
                answers.append(functools.partial(_created, mod, name, None, checked.code, checked.message))
                continue
            if request.validate_only:
                accepted[name] = (TopicInfo(name, ZERO_UUID, checked[0]), checked[1])
            answers.append(functools.partial(_accepted_answer, broker, ctx, mod, described, name, accepted, outcomes))
        while submitted < len(reserved):  # step 2: the disk work, chunk by chunk off the loop
            chunk = reserved[submitted : submitted + CREATE_CHUNK]
            submitted += len(chunk)
            for new, outcome in zip(chunk, await store.create_reserved(chunk), strict=True):
                outcomes[new.info.name] = outcome
                if isinstance(outcome, TopicInfo):
                    accepted[new.info.name] = (outcome, dict(new.configs))
                else:
                    log.warning("CreateTopics: topic %r not created: %s", new.info.name, outcome)
    finally:
        for new in reserved[submitted:]:
            store.release(new)
    return await _answer_in_slices(mod, "CreateTopicsResponse", "topics", answers)


def _accepted_answer(
    broker: Broker,
    ctx: RequestContext,
    mod: ModuleType,
    described: _DescribedConfigs,
    name: str,
    accepted: dict[str, tuple[TopicInfo, dict[str, str]]],
    outcomes: dict[str, TopicInfo | OSError],
) -> Any:
    """The result of a topic that passed the checks: created (or, validate_only, creatable), or its writing
    failed. A result with its configurations comes encoded already (``bytes``)."""
    failed = outcomes.get(name)
    if isinstance(failed, OSError) or name not in accepted:
        reason = failed.strerror or str(failed) if isinstance(failed, OSError) else "not created"
        return _created(mod, name, None, ErrorCode.unknown_server_error, f"The topic could not be written: {reason}")
    info, configs = accepted[name]
    if not may(broker, ctx, AclOperation.DESCRIBE_CONFIGS, info.name):  # its configuration is not the
        return _created(mod, info.name, info, ErrorCode.none, None, configs_hidden=True)  # principal's to see
    return described.result(info, configs)


class _DescribedConfigs:
    """Created topics' results with their configurations, for one large CreateTopics: the topics mostly share
    the same overrides (none), so each distinct set of overrides is described and encoded once and its bytes
    spliced into each result (the same bytes ``_created`` would give)."""

    def __init__(self, mod: ModuleType, store: TopicStore) -> None:
        self._mod = mod
        self._store = store
        self._encoded: dict[tuple[tuple[str, str], ...], tuple[int, bytes]] = {}

    def result(self, info: TopicInfo, configs: dict[str, str]) -> Any:
        mod = self._mod
        if not hasattr(mod, "CreatableTopicConfigs"):  # (before v5 a result has no configurations)
            return _created(mod, info.name, info, ErrorCode.none, None)
        key = tuple(sorted(configs.items()))
        known = self._encoded.get(key)
        if known is None:
            entries = _created(
                mod, info.name, info, ErrorCode.none, None, describe_topic(self._store.configs.defaults, configs)
            ).configs
            buffer = io.BytesIO()
            writer = entity_writer(mod.CreatableTopicConfigs)
            for entry in entries:
                writer(buffer, entry)
            known = self._encoded[key] = (len(entries), buffer.getvalue())
        count, data = known
        return splice(_created(mod, info.name, info, ErrorCode.none, None, []), "configs", count, data)


def _screen(broker: Broker, ctx: RequestContext, request: Any) -> tuple[Counter[str], set[str], bool]:
    """Each name's count in the request, the names the principal may create, and whether the request asks
    for more partitions than Kafka's controller takes in one request."""
    named = Counter(t.name for t in request.topics)
    on_cluster = may_on_cluster(broker, ctx, AclOperation.CREATE)
    # (a duplicate is refused below before its authorization is looked at, as in Kafka)
    creatable = {name for name in named if on_cluster or may(broker, ctx, AclOperation.CREATE, name)}
    wanted = [t for t in request.topics if t.name in creatable]
    return named, creatable, _requested_partitions(wanted, broker.default_partitions) > MAX_PARTITIONS_PER_REQUEST


def _too_many(mod: ModuleType, name: str, creatable: set[str]) -> Any:
    if name in creatable:
        return _created(
            mod, name, None, ErrorCode.policy_violation, "Excessively large number of partitions per request."
        )
    return _created(mod, name, None, UNAUTHORIZED, "Authorization failed.")


@dataclasses.dataclass(frozen=True, slots=True)
class _Verdict:
    """A topic of a CreateTopics refused: the code and message of its result."""

    code: ErrorCode
    message: str


def _check_topic(
    store: TopicStore, topic: Any, named: Counter[str], creatable: set[str], default_partitions: int
) -> _Verdict | tuple[int, dict[str, str]]:
    """Kafka's checks of one topic of a CreateTopics, in Kafka's order: its refusal, or (partitions, configs)."""
    if named[topic.name] > 1:
        return _Verdict(ErrorCode.invalid_request, "Found multiple entries for this topic.")
    if topic.name not in creatable:
        return _Verdict(UNAUTHORIZED, "Authorization failed.")
    try:
        count = _partition_count(topic, default_partitions)
        store.check_new_topic(topic.name, count)
        configs = topic_configs_of_request((c.name, c.value) for c in topic.configs)
    except ConfigError as exc:
        return _Verdict(ErrorCode.invalid_config, str(exc))
    except _Refused as refused:
        return _Verdict(refused.code, str(refused))
    except (InvalidTopicError, TopicExistsError, PartitionLimitError) as exc:
        return _refusal(exc)
    return count, dict(configs)


def _refusal(exc: InvalidTopicError | TopicExistsError | PartitionLimitError) -> _Verdict:
    if isinstance(exc, InvalidTopicError):
        return _Verdict(ErrorCode.invalid_topic_exception, str(exc))
    if isinstance(exc, TopicExistsError):
        return _Verdict(ErrorCode.topic_already_exists, str(exc))
    return _Verdict(exc.code, str(exc))


async def _answer_in_slices(
    mod: ModuleType, response: str, field: str, items: Sequence[Callable[[], Any]], **values: Any
) -> PreEncoded:
    """The response ``response`` whose array ``field`` holds the entities ``items`` make (or their encodings,
    for results without an error), built and encoded
    ``ANSWER_SLICE`` at a time with a turn of the event loop between (a few thousand topic results with their
    configurations take half a second to encode at once)."""
    skeleton = build(mod, response, throttle_time=NO_THROTTLE, **values, **{field: ()})
    parts: list[bytes] = []
    errors: list[int] = []
    writer: Callable[[io.BytesIO, Any], object] | None = None
    for start in range(0, len(items), ANSWER_SLICE):
        if start:
            await asyncio.sleep(0)
        buffer = io.BytesIO()
        for make in items[start : start + ANSWER_SLICE]:
            item = make()
            if isinstance(item, bytes):  # encoded already (a success: no error code)
                buffer.write(item)
                continue
            if writer is None:
                writer = entity_writer(type(item))
            writer(buffer, item)
            if item.error_code:
                errors.append(int(item.error_code))
        parts.append(buffer.getvalue())
    return PreEncoded(type(skeleton), splice_pieces(skeleton, field, len(items), parts), tuple(errors))


def _requested_partitions(topics: Any, default_partitions: int) -> int:
    """The partitions a CreateTopics asks for in all, counted as Kafka's controller counts them."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _partition_count(topic: Any, default_partitions: int) -> int:
    """Kafka's checks of partitions, replication factor and a manual assignment, for a single broker."""
    rf, count = topic.replication_factor, topic.num_partitions
    if topic.assignments:
        if count != -1 or rf != -1:
            message = (
                "A manual partition assignment was specified, but numPartitions or replicationFactor was not set to -1."
            )
            raise _Refused(ErrorCode.invalid_request, message)
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise _Refused(ErrorCode.invalid_replica_assignment, "Partitions should be numbered 0 to N-1.")
        for a in topic.assignments:
            if list(a.broker_ids) != [NODE_ID]:
                message = (
                    f"The manual partition assignment includes broker(s) other than {NODE_ID}: {list(a.broker_ids)}"
                )
                raise _Refused(ErrorCode.invalid_replica_assignment, message)
        return len(indexes)
    if count == 0 or count < -1:
        raise _Refused(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
    if rf == 0 or rf < -1:
        message = "Replication factor must be larger than 0, or -1 to use the default value."
        raise _Refused(ErrorCode.invalid_replication_factor, message)
    if rf > 1:
        message = (
            f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be "
            "reached because only 1 broker(s) are registered."
        )
        raise _Refused(ErrorCode.invalid_replication_factor, message)
    return default_partitions if count == -1 else count


def _created(
    mod: ModuleType,
    name: str,
    info: TopicInfo | None,
    code: ErrorCode,
    message: str | None,
    described: list[Described] | None = None,
    *,
    configs_hidden: bool = False,
) -> Any:
    """One topic's CreateTopics result; ``configs_hidden``: created, but the principal may not DESCRIBE_CONFIGS
    it, so Kafka's controller answers without its configuration, partition count and replication factor."""
    if configs_hidden and info is not None:
        return build(
            mod,
            "CreatableTopicResult",
            name=name,
            topic_id=info.topic_id,
            error_code=code,
            error_message=message,
            topic_config_error_code=UNAUTHORIZED,
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        )
    configs = tuple(
        build(
            mod,
            "CreatableTopicConfigs",
            name=d.name,
            value=d.value,
            read_only=d.read_only,
            config_source=d.source,
            is_sensitive=d.sensitive,
        )
        for d in (described or () if hasattr(mod, "CreatableTopicConfigs") else ())
    )
    return build(
        mod,
        "CreatableTopicResult",
        name=name,
        topic_id=info.topic_id if info else ZERO_UUID,
        error_code=code,
        error_message=message,
        num_partitions=info.partitions if info else -1,
        replication_factor=1 if info else -1,
        configs=configs if info else None,
    )


# ---------------------------------------------------------------------- DeleteTopics


async def handle_delete_topics(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DELETE on the Cluster or on each Topic (DESCRIBE on it decides what a refusal discloses).

    ``DELETE_CHUNK`` topics per turn of the loop (each renamed into ``trash/``), their logs closed in slices
    and the renames made durable by one fsync on the topic store's worker thread before the answer, their files
    removed there after it: a topic of 10,000 partitions with data took seconds to delete on the loop."""
    mod = response_module(request)
    store = store_of(broker)
    trash: list[Path] = []
    deleted: list[int] = []  # indexes of the results of topics deleted

    def detach(name: str) -> bool:
        path = store.detach_topic(name)
        if path is None:
            return False
        trash.append(path)
        deleted.append(len(results))
        return True

    results: list[Any] = []
    on_cluster = may_on_cluster(broker, ctx, AclOperation.DELETE)
    wanted = _deletions(request)
    with store.batched():  # one new cluster image for the request (it costs as much as 50 deletions)
        for start in range(0, len(wanted), DELETE_CHUNK):
            if start:
                await asyncio.sleep(0)
            for one in wanted[start : start + DELETE_CHUNK]:
                results.append(_delete_one(broker, ctx, mod, on_cluster, one, detach))
    try:
        await store.settle_deletes(trash)
    except OSError as exc:  # deleted, but not durably: not acknowledged
        log.warning("DeleteTopics: the deletions could not be made durable: %s", exc)
        for i in deleted:
            results[i] = build(
                mod,
                "DeletableTopicResult",
                name=results[i].name,
                topic_id=results[i].topic_id,
                error_code=ErrorCode.unknown_server_error,
                error_message=f"The deletion could not be made durable: {exc.strerror or exc}",
            )
    return await _answer_in_slices(
        mod, "DeleteTopicsResponse", "responses", [functools.partial(_given, r) for r in results]
    )


def _given(entity: Any) -> Any:
    return entity


@dataclasses.dataclass(frozen=True, slots=True)
class _Deletion:
    """One topic of a DeleteTopics: as named, and how many times the request names it so."""

    name: str | None
    topic_id: uuid.UUID | None
    times: int


def _deletions(request: Any) -> list[_Deletion]:
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if hasattr(request, "topics"):  # v6+: by name or by id
        wanted = [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    times_wanted = Counter(wanted)
    return [_Deletion(name, topic_id, times_wanted[(name, topic_id)]) for name, topic_id in wanted]


def _delete_one(
    broker: Broker,
    ctx: RequestContext,
    mod: ModuleType,
    on_cluster: bool,
    wanted: _Deletion,
    delete: Callable[[str], bool],
) -> Any:
    """One topic's DeleteTopics result (``on_cluster``: DELETE on the Cluster); ``delete`` deletes a topic
    (``False``: there is none)."""
    store = store_of(broker)

    def may_delete(topic: str) -> bool:
        return on_cluster or may(broker, ctx, AclOperation.DELETE, topic)

    def may_describe(topic: str) -> bool:
        return on_cluster or may(broker, ctx, AclOperation.DESCRIBE, topic)

    name, topic_id = wanted.name, wanted.topic_id
    message: str | None
    if name is not None and topic_id is not None:
        code, message = ErrorCode.invalid_request, "You may not specify both topic name and topic id."
    elif wanted.times > 1:
        code, message = ErrorCode.invalid_request, "Duplicate topic name." if name else "Duplicate topic id."
    elif name is None:
        info = store.topic_by_id(topic_id) if topic_id is not None else None
        name = info.name if info else None
        code, message = ErrorCode.unknown_topic_id, "This server does not host this topic ID."
        if info is not None and not may_delete(info.name):
            code, message = UNAUTHORIZED, "Topic authorization failed."
            name = info.name if may_describe(info.name) else None
        elif info is not None and delete(info.name):
            code, message = ErrorCode.none, None
    elif not may_describe(name):
        code, message = UNAUTHORIZED, "Topic authorization failed."
    else:
        info = store.topic(name)
        topic_id = info.topic_id if info else None
        code, message = ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        if info is not None and not may_delete(name):
            code, message, topic_id = UNAUTHORIZED, "Topic authorization failed.", None
        elif delete(name):
            code, message = ErrorCode.none, None
    return build(
        mod,
        "DeletableTopicResult",
        name=name,
        topic_id=topic_id or ZERO_UUID,
        error_code=code,
        error_message=message,
    )


# ---------------------------------------------------------------------- error responses (every slot)


def _metadata_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    topics = tuple(
        _topic_error(mod, wanted.name, error, getattr(wanted, "topic_id", None)) for wanted in request.topics or ()
    )
    return build(
        mod,
        "MetadataResponse",
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=CLUSTER_ID,
        controller_id=-1,
        topics=topics,
        error_code=error,
    )


def _create_topics_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    results = tuple(_created(mod, topic.name, None, error, None) for topic in request.topics)
    return build(mod, "CreateTopicsResponse", throttle_time=NO_THROTTLE, topics=results)


def _delete_topics_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    if hasattr(request, "topics"):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = tuple(
        build(mod, "DeletableTopicResult", name=name, topic_id=topic_id or ZERO_UUID, error_code=error)
        for name, topic_id in wanted
    )
    return build(mod, "DeleteTopicsResponse", throttle_time=NO_THROTTLE, responses=results)


# Topic names are checked by the handlers themselves: Kafka's rules give INVALID_TOPIC_EXCEPTION (creation,
# auto-creation) or UNKNOWN_TOPIC_OR_PARTITION (a name no topic has).
_TOPIC_NAMES = frozenset({TOPIC_NAME})

SPECS: list[ApiSpec] = [
    ApiSpec(3, 0, 13, handle_metadata, _metadata_error, _TOPIC_NAMES),
    ApiSpec(19, 2, 7, handle_create_topics, _create_topics_error, _TOPIC_NAMES),
    ApiSpec(20, 1, 6, handle_delete_topics, _delete_topics_error, _TOPIC_NAMES),
]

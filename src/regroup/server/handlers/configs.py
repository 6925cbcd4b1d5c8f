"""DescribeConfigs (v1–v4), AlterConfigs (v0–v2) and IncrementalAlterConfigs (v0–v1): topic configurations,
stored durably and honoured by the partition log, and the broker's settings, read-only.

Resources, as Kafka answers them (``ConfigHelper``, ``ConfigAdminManager``, the controller's checks):

- **TOPIC**: an illegal name is INVALID_TOPIC_EXCEPTION, a name no topic has UNKNOWN_TOPIC_OR_PARTITION.
  Described: every topic configuration, with its source and — when asked (``include_synonyms``,
  ``include_documentation``; v3+ for type and documentation) — synonyms and documentation, only those named
  in ``configuration_keys`` if any. AlterConfigs replaces the topic's whole set of overrides;
  IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT (the last two on list configurations only).
  An unknown name or a bad value is INVALID_CONFIG with a message, and nothing changes. ``validate_only``
  checks without storing.
- **BROKER**: ``"0"`` (this node) is described with every setting, read-only; ``""`` (the cluster-wide
  dynamic defaults) with none, as there are none. Another id, or one that is not a number, is INVALID_REQUEST.
  Altering a broker setting is INVALID_REQUEST ("Cannot update these configs dynamically", as Kafka says for a
  setting that is not dynamic: every one is static here); an alteration that changes nothing passes.
- **GROUP** (KIP-848's dynamic group configuration; ``server/group_configs.py``): any non-empty group id, whether
  or not the group exists (an empty one is INVALID_REQUEST). Described: every group setting, the group's own
  or the broker's. Altered like a topic (AlterConfigs replaces the group's settings, IncrementalAlterConfigs
  applies SET and DELETE; APPEND and SUBTRACT are INVALID_CONFIG, no group setting being a list); the
  group's whole configuration is checked (INVALID_CONFIG, nothing changes), stored durably, then handed to
  the coordinator, which applies the consumer settings from each member's next heartbeat.
- **BROKER_LOGGER** ``"0"`` (``server/broker_loggers.py``): every logger of the server with its effective
  level (source DYNAMIC_BROKER_LOGGER_CONFIG); IncrementalAlterConfigs sets or unsets levels at once, not
  stored. Another id is INVALID_REQUEST, as is the resource in AlterConfigs ("Unknown resource type 8": Kafka's
  legacy AlterConfigs does not take it).
- Anything else (CLIENT_METRICS, unknown types) is INVALID_REQUEST.

Each resource of an alteration is checked, stored durably and applied before the next; one of many resources
gives the event loop a turn every ``ALTER_SLICE_S`` (an fsync of the file and one of its directory per topic:
1,000 topics held the loop for seconds under ``--fsync always``). A DescribeConfigs answer is put together from
kept configs arrays, a chunk of resources at a time (``server/config_answers.py``).

A resource named twice in one alteration gets INVALID_REQUEST for both, a configuration named twice in one
resource INVALID_REQUEST, a null value (other than DELETE's) INVALID_REQUEST.

Authorization, per resource, as Kafka checks it (``ConfigHelper``, ``ConfigAdminManager``, ``ControllerApis``):
DescribeConfigs needs DESCRIBE_CONFIGS, AlterConfigs and IncrementalAlterConfigs ALTER_CONFIGS, on the Topic
(else TOPIC_AUTHORIZATION_FAILED), on the Group (GROUP_AUTHORIZATION_FAILED), or on the Cluster for BROKER and
BROKER_LOGGER resources (CLUSTER_AUTHORIZATION_FAILED), each with Kafka's default message. A refused resource
is answered without configurations and is not changed; the others are answered as usual. The check comes
before the resource's own checks (its name, its existence, the values), except that an alteration's
duplicate and null checks come first, and a BROKER alteration is judged (broker id, static settings) before
its authorization, as Kafka's broker does before forwarding it to the controller.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from regroup.network.limits import DEFAULT_LIMITS, GROUP_ID
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import NODE_ID, ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed
from regroup.server.broker_configs import BrokerConfigEntry, broker_config_entries
from regroup.server.broker_loggers import (
    LoggerRequestError,
    apply_logger_changes,
    check_logger_changes,
    logger_levels,
)
from regroup.server.config_answers import ConfigArrays, DescribedResult, describe_configs_answer
from regroup.server.config_view import Described, describe_broker, describe_group, describe_loggers, describe_topic
from regroup.server.group_configs import GroupConfigStore, core_group_config, validate_group_configs
from regroup.server.handlers.topics import NO_THROTTLE, build, response_module, store_of
from regroup.server.time_slices import HeldSlices
from regroup.server.topics import InvalidTopicError, TopicStore, validate_topic_name
from regroup.storage.format import StorageError
from regroup.storage.topic_config import TOPIC_KEYS, ConfigError, ConfigType, validate_topic_configs

__all__ = ["SPECS", "handle_alter_configs", "handle_describe_configs", "handle_incremental_alter_configs"]

log = logging.getLogger(__name__)

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TYPE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


#: config resource type -> (the ACL resource type checked, the error without the ACL, Kafka's message)
_ACL_OF: dict[int, tuple[ResourceType, ErrorCode, str]] = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed, "Topic authorization failed."),
    GROUP: (ResourceType.GROUP, ErrorCode.group_authorization_failed, "Group authorization failed."),
    BROKER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
}


def _authorize(broker: Broker, ctx: RequestContext, operation: AclOperation, resource_type: int, name: str) -> None:
    """``operation`` on the resource's ACL resource (the Cluster for BROKER and BROKER_LOGGER), else its
    authorization error; other config resource types are not checked (they are refused on their own)."""
    acl = _ACL_OF.get(resource_type)
    if acl is None:
        return
    acl_type, error, message = acl
    if not allowed(broker, ctx, operation, acl_type, CLUSTER_NAME if acl_type is ResourceType.CLUSTER else name):
        raise _Refused(error, message)


def _type_name(resource_type: int) -> str:
    return _TYPE_NAMES.get(resource_type, str(resource_type))


def _broker_entries(broker: Broker) -> Mapping[str, BrokerConfigEntry]:
    entries: Mapping[str, BrokerConfigEntry] | None = getattr(broker, "broker_configs", None)
    if entries:
        return entries
    from regroup.server.app import ServerConfig

    return broker_config_entries(ServerConfig())


def _group_store(broker: Broker) -> GroupConfigStore:
    store: GroupConfigStore | None = getattr(broker, "group_configs", None)
    if store is None:
        raise _Refused(ErrorCode.invalid_request, "Unsupported resource type: GROUP")
    return store


def _check_group_name(name: str) -> None:
    if not name:
        raise _Refused(ErrorCode.invalid_request, "Group name must not be empty")
    if len(name.encode("utf-8")) > DEFAULT_LIMITS[GROUP_ID]:
        raise _Refused(ErrorCode.invalid_request, f"Group name longer than {DEFAULT_LIMITS[GROUP_ID]} bytes")


def _check_broker_name(name: str, *, empty_ok: bool) -> None:
    if name == "" and empty_ok:
        return
    try:
        node = int(name)
    except ValueError:
        raise _Refused(ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}") from None
    if node != NODE_ID:
        expected = f"{NODE_ID} or empty string" if empty_ok else str(NODE_ID)
        raise _Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected {expected}, but received {name}")


def _existing_topic(store: TopicStore, name: str) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise _Refused(ErrorCode.invalid_topic_exception, str(exc)) from None
    if store.topic(name) is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")


# ---------------------------------------------------------------------- DescribeConfigs


async def handle_describe_configs(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE_CONFIGS on each resource's Topic, Group or (BROKER, BROKER_LOGGER) the Cluster."""
    mod = response_module(request)
    store = store_of(broker)
    synonyms, docs = request.include_synonyms, getattr(request, "include_documentation", False)
    results: list[DescribedResult] = []
    for resource in request.resources:
        resource_type, name = resource.resource_type, resource.resource_name
        keys = tuple(resource.configuration_keys) if resource.configuration_keys else None
        try:
            _authorize(broker, ctx, AclOperation.DESCRIBE_CONFIGS, resource_type, name)
            key, describe = _describer(store, broker, resource_type, name, keys)
        except _Refused as refused:
            results.append((int(refused.code), str(refused), resource_type, name, None, _NOTHING))
            continue
        results.append((0, None, resource_type, name, key, describe))
    empty = build(mod, "DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=())
    return await describe_configs_answer(mod, empty, results, _ARRAYS, synonyms, docs)


#: the configs arrays of the answers, kept by what decides them (``server/config_answers.py``)
_ARRAYS = ConfigArrays()


def _nothing() -> list[Described]:
    return []


_NOTHING: Callable[[], list[Described]] = _nothing  # (a refused resource has no entries)


def _describer(
    store: TopicStore, broker: Broker, resource_type: int, name: str, keys: tuple[str, ...] | None
) -> tuple[Hashable | None, Callable[[], list[Described]]]:
    """The resource's checks (raising ``_Refused``), then what decides its described entries (None: not kept)
    and how to describe them."""
    if resource_type == TOPIC:
        _existing_topic(store, name)
        defaults, overrides = store.configs.defaults, store.configs.overrides(name)
        key = (TOPIC, keys, tuple(sorted(overrides.items())), defaults)
        return key, functools.partial(describe_topic, defaults, overrides, keys)
    if resource_type == BROKER:
        _check_broker_name(name, empty_ok=True)
        if name == "":
            return None, _NOTHING
        return None, functools.partial(describe_broker, _broker_entries(broker), keys)
    if resource_type == GROUP:
        groups = _group_store(broker)
        _check_group_name(name)
        config, group_overrides = groups.config, groups.overrides(name)
        group_key: Hashable | None = (GROUP, keys, tuple(sorted(group_overrides.items())), config)
        try:
            hash(group_key)
        except TypeError:
            group_key = None
        return group_key, functools.partial(describe_group, config, group_overrides, keys)
    if resource_type == BROKER_LOGGER:
        if not name:
            raise _Refused(ErrorCode.invalid_request, "Broker id must not be empty")
        _check_broker_name(name, empty_ok=False)
        return None, functools.partial(describe_loggers, logger_levels(), keys)
    raise _Refused(ErrorCode.invalid_request, f"Unsupported resource type: {_type_name(resource_type)}")


# ---------------------------------------------------------------------- AlterConfigs / IncrementalAlterConfigs


async def handle_alter_configs(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource's Topic, Group or (BROKER) the Cluster."""
    return await _alter(broker, ctx, request, _replace_all, "AlterConfigsResponse")


async def handle_incremental_alter_configs(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource's Topic, Group or (BROKER, BROKER_LOGGER) the Cluster."""
    return await _alter(broker, ctx, request, _incremental, "IncrementalAlterConfigsResponse")


#: the default of a list configuration (what APPEND and SUBTRACT start from), None for any other name
ListDefault = Callable[[str], str | None]
Change = Callable[[dict[str, str], Any, ListDefault], dict[str, str]]


def _topic_list_default(name: str) -> str | None:
    key = TOPIC_KEYS.get(name)
    return (key.default or "") if key is not None and key.type is ConfigType.LIST else None


def _no_lists(name: str) -> str | None:
    return None


#: an alteration of many resources gives the event loop a turn once this long was spent on them since the last
#: (each resource is checked on the loop, its file written and fsynced on a worker thread, then applied)
ALTER_SLICE_S = 0.004

#: a resource's change being stored: the write's future (its callbacks apply the change once written), and
#: whether the resource is still the one changed once it is done (a topic deleted meanwhile is not)
_Written = tuple[asyncio.Future[None], Callable[[], bool]]


async def _alter(broker: Broker, ctx: RequestContext, request: Any, change: Change, response: str) -> Any:
    mod = response_module(request)
    store = store_of(broker)
    seen = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    with HeldSlices(ALTER_SLICE_S, ctx) as slices:
        for resource in request.resources:
            await slices.tick()
            code, message = ErrorCode.none, None
            try:
                if seen[(resource.resource_type, resource.resource_name)] > 1:
                    raise _Refused(ErrorCode.invalid_request, "Each resource must appear at most once.")
                await _alter_serialised(broker, ctx, store, resource, change, request.validate_only, slices)
            except _Refused as refused:
                code, message = refused.code, str(refused)
            except ConfigError as exc:
                code, message = ErrorCode.invalid_config, str(exc)
            except (OSError, StorageError) as exc:
                log.error("storing the configuration of %s failed: %s", resource.resource_name, exc)
                code, message = ErrorCode.kafka_storage_error, f"{type(exc).__name__}: {exc}"
            responses.append(
                build(
                    mod,
                    "AlterConfigsResourceResponse",
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
    return build(mod, response, throttle_time=NO_THROTTLE, responses=tuple(responses))


async def _alter_serialised(
    broker: Broker,
    ctx: RequestContext,
    store: TopicStore,
    resource: Any,
    change: Change,
    validate_only: bool,
    slices: HeldSlices,
) -> None:
    """One resource's alteration: checked and its new configuration made from the current one, its file
    written off the loop, the change applied once written. Alterations of the topics (of the groups) follow one
    another, each holding the store's lock from its reading of the current configuration until its write is
    done (even if this request is cancelled meanwhile)."""
    lock = _lock_of(broker, store, resource.resource_type)
    if lock is None:
        _alter_one(broker, ctx, store, resource, change, validate_only)
        return
    if lock.locked():
        slices.hold()
    await lock.acquire()
    released = False
    try:
        written = _alter_one(broker, ctx, store, resource, change, validate_only)
        if written is None:
            return
        done, still_there = written
        done.add_done_callback(lambda _: lock.release())
        released = True
        slices.hold()
        gone = _Refused(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        try:
            await asyncio.shield(done)
        except OSError:
            if not still_there():  # (a topic deleted meanwhile is unknown, whatever its write did)
                raise gone from None
            raise
        finally:
            slices.restart()
        if not still_there():
            raise gone
    finally:
        if not released:
            lock.release()


def _lock_of(broker: Broker, store: TopicStore, resource_type: int) -> asyncio.Lock | None:
    """The lock that orders the alterations of resources of this type (None: nothing is written)."""
    if resource_type == TOPIC:
        return store.config_lock
    if resource_type == GROUP:
        groups: GroupConfigStore | None = getattr(broker, "group_configs", None)
        return None if groups is None else groups.lock
    return None


def _when_written(done: asyncio.Future[None], then: Callable[[], None]) -> None:
    if not done.cancelled() and done.exception() is None:
        then()


def _alter_one(
    broker: Broker, ctx: RequestContext, store: TopicStore, resource: Any, change: Change, validate_only: bool
) -> _Written | None:
    """Check one resource's alteration and start storing it (a topic's or a group's configuration: the write
    under way, which the caller awaits); the others are applied at once."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs if c.value is None and getattr(c, "config_operation", SET) != DELETE]
    if nulls:
        raise _Refused(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")

    def authorize() -> None:
        _authorize(broker, ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)

    if resource.resource_type == TOPIC:
        authorize()
        _existing_topic(store, resource.resource_name)
        name = resource.resource_name
        current = store.configs.overrides(name)
        new = validate_topic_configs(change(current, resource.configs, _topic_list_default))
        info = store.topic(name)
        written = None if validate_only else store.write_topic_configs(name, new)
        return None if written is None else (written, lambda: store.topic(name) is info)
    if resource.resource_type == GROUP:
        authorize()
        groups, group = _group_store(broker), resource.resource_name
        _check_group_name(group)
        new = validate_group_configs(change(groups.overrides(group), resource.configs, _no_lists), groups.config)
        if groups.full(group) and new:
            raise _Refused(ErrorCode.invalid_request, "Too many groups have a configuration already.")
        if validate_only:
            return None
        written = groups.write(group, new)
        config = core_group_config(new)
        written.add_done_callback(
            functools.partial(
                _when_written, then=functools.partial(broker.coordinator.update_group_config, group, config)
            )
        )
        return written, lambda: True
    if resource.resource_type == BROKER_LOGGER and change is _incremental:
        authorize()
        _check_broker_name(resource.resource_name, empty_ok=False)
        changes = [(c.config_operation, c.name, c.value) for c in resource.configs]
        try:
            check_logger_changes(changes)
        except LoggerRequestError as exc:
            raise _Refused(ErrorCode.invalid_request, str(exc)) from None
        if not validate_only:
            apply_logger_changes(changes)
        return None
    if resource.resource_type == BROKER:
        _check_broker_name(resource.resource_name, empty_ok=True)
        for config in resource.configs:
            op = getattr(config, "config_operation", SET)
            if op not in (SET, DELETE, APPEND, SUBTRACT):
                raise _Refused(ErrorCode.invalid_request, f"Unknown operations type {op}")
        if names:
            listed = ", ".join(sorted(set(names)))
            raise _Refused(ErrorCode.invalid_request, f"Cannot update these configs dynamically: Set({listed})")
        authorize()
        return None
    raise _Refused(ErrorCode.invalid_request, f"Unknown resource type {_type_name(resource.resource_type)}")


def _replace_all(current: dict[str, str], configs: Any, list_default: ListDefault) -> dict[str, str]:
    return {c.name: c.value for c in configs}


def _incremental(current: dict[str, str], configs: Any, list_default: ListDefault) -> dict[str, str]:
    new = dict(current)
    for c in configs:
        op = c.config_operation
        if op == SET:
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            default = list_default(c.name)
            if default is None:
                verb = "append" if op == APPEND else "subtract"
                raise ConfigError(f"Config value {verb} is not allowed for config key: {c.name}")
            old = new.get(c.name, default)
            items = [item for item in old.split(",") if item]
            given = [item.strip() for item in c.value.split(",")]
            if op == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            new[c.name] = ",".join(items)
        else:
            raise _Refused(ErrorCode.invalid_request, f"Unknown operations type {op}")
    return new


# ---------------------------------------------------------------------- error responses (every slot)


def _describe_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    results = tuple(
        build(
            mod,
            "DescribeConfigsResult",
            error_code=error,
            error_message=None,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=(),
        )
        for r in request.resources
    )
    return build(mod, "DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=results)


def _alter_error_response(response: str) -> Callable[[RequestContext, Any, int], Any]:
    """The error response of AlterConfigs or IncrementalAlterConfigs (``response``: its entity's name), which
    answer each resource alike."""

    def error(ctx: RequestContext, request: Any, code: int) -> Any:
        mod, error = response_module(request), ErrorCode(int(code))
        responses = tuple(
            build(
                mod,
                "AlterConfigsResourceResponse",
                error_code=error,
                error_message=None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.resources
        )
        return build(mod, response, throttle_time=NO_THROTTLE, responses=responses)

    return error


_alter_error = _alter_error_response("AlterConfigsResponse")
_incremental_error = _alter_error_response("IncrementalAlterConfigsResponse")


SPECS: list[ApiSpec] = [
    ApiSpec(32, 1, 4, handle_describe_configs, _describe_error),
    ApiSpec(33, 0, 2, handle_alter_configs, _alter_error),
    ApiSpec(44, 0, 1, handle_incremental_alter_configs, _incremental_error),
]

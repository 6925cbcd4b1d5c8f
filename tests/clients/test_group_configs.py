"""A group's own configuration (KIP-848's dynamic group configuration: the GROUP resource of DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs) through real admin clients against ``regroup serve``: confluent-kafka's
``AdminClient`` and kafka-python's ``KafkaAdminClient``. Checked as a user would: the settings read back with
their source, also after a kill -9 and restart; bad settings refused with Kafka's INVALID_CONFIG and nothing
changed; and the consumer settings acted on — a consumer-protocol member is told the group's heartbeat interval
and fenced after the group's session timeout, not the broker's (raw ConsumerGroupHeartbeat requests, so the
test controls when a member goes silent)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, served
from tests.server.wire import WireClient

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

INVALID_CONFIG, INVALID_REQUEST = 40, 42
DESCRIBE_CONFIGS, INCREMENTAL_ALTER, HEARTBEAT_848, DESCRIBE_848 = 32, 44, 68, 69
GROUP = 32
#: the broker's consumer-group settings in these tests (short, so a fencing is quick to see); they widen the
#: ranges a group's settings may take to 2 s - 60 s and 500 ms - 15 s
BROKER_SESSION_MS, BROKER_HEARTBEAT_MS = 2_000, 500


#: ``regroup serve`` with those settings
BROKER_ARGS = (
    "--consumer-session-timeout-ms",
    str(BROKER_SESSION_MS),
    "--consumer-heartbeat-interval-ms",
    str(BROKER_HEARTBEAT_MS),
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with served(tmp_path, *BROKER_ARGS) as proc:
        yield proc


def _admin(server: ServerProcess) -> Any:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}"})


def _describe(admin: Any, group: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([resource])[resource].result(20))


def _alter(admin: Any, group: str, *entries: tuple[str, str | None, Any]) -> None:
    configs = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in entries]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=configs)
    admin.incremental_alter_configs([resource])[resource].result(20)


def _heartbeat(client: WireClient, group: str, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "group_id": group,
        "member_id": str(uuid.uuid4()),  # (a KIP-848 client names itself from v1)
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    }
    values.update(fields)
    return client.call(HEARTBEAT_848, 1, **values)


def _ms(interval: datetime.timedelta) -> int:
    return round(interval.total_seconds() * 1000)


def _members(client: WireClient, group: str) -> list[str]:
    described = client.call(DESCRIBE_848, 0, group_ids=[group], include_authorized_operations=False).groups[0]
    return [m.member_id for m in described.members]


def test_a_group_is_described_with_the_broker_settings_then_its_own(server: ServerProcess) -> None:
    admin = _admin(server)
    described = _describe(admin, "orders")  # no such group yet: its configuration exists all the same
    session = described["consumer.session.timeout.ms"]
    assert (session.value, session.source) == (str(BROKER_SESSION_MS), ConfigSource.DEFAULT_CONFIG.value)
    assert described["consumer.heartbeat.interval.ms"].value == str(BROKER_HEARTBEAT_MS)
    assert described["share.auto.offset.reset"].value == "latest"
    assert not session.is_read_only

    _alter(
        admin,
        "orders",
        ("consumer.session.timeout.ms", "3000", AlterConfigOpType.SET),
        ("consumer.heartbeat.interval.ms", "700", AlterConfigOpType.SET),
    )
    described = _describe(admin, "orders")
    assert (described["consumer.session.timeout.ms"].value, described["consumer.session.timeout.ms"].source) == (
        "3000",
        ConfigSource.GROUP_CONFIG.value,
    )
    assert described["consumer.heartbeat.interval.ms"].value == "700"
    assert _describe(admin, "other")["consumer.session.timeout.ms"].value == str(BROKER_SESSION_MS)

    _alter(admin, "orders", ("consumer.heartbeat.interval.ms", None, AlterConfigOpType.DELETE))
    described = _describe(admin, "orders")
    assert described["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["consumer.session.timeout.ms"].value == "3000"


@pytest.mark.parametrize(
    ("name", "value", "op"),
    [
        ("consumer.unknown.setting", "1", AlterConfigOpType.SET),
        ("consumer.session.timeout.ms", "1000", AlterConfigOpType.SET),  # below the broker's 2 s floor here
        ("consumer.session.timeout.ms", "600000", AlterConfigOpType.SET),  # above its 60 s ceiling
        ("consumer.session.timeout.ms", "soon", AlterConfigOpType.SET),
        ("consumer.heartbeat.interval.ms", "12000", AlterConfigOpType.SET),  # not below the group's 4 s session
        ("share.auto.offset.reset", "middle", AlterConfigOpType.SET),
        ("consumer.session.timeout.ms", "3000", AlterConfigOpType.APPEND),  # not a list
        ("consumer.assignment.interval.ms", "-1", AlterConfigOpType.SET),
        ("consumer.assignment.interval.ms", "15001", AlterConfigOpType.SET),  # above the broker's 15 s ceiling
    ],
)
def test_a_bad_setting_is_invalid_config_and_changes_nothing(
    server: ServerProcess, name: str, value: str, op: Any
) -> None:
    admin = _admin(server)
    _alter(admin, "g", ("consumer.session.timeout.ms", "4000", AlterConfigOpType.SET))
    with pytest.raises(KafkaException) as refused:
        _alter(admin, "g", (name, value, op))
    assert refused.value.args[0].code() == INVALID_CONFIG
    assert _describe(admin, "g")["consumer.session.timeout.ms"].value == "4000"


def test_a_group_s_assignment_interval_is_described_altered_and_acted_on(server: ServerProcess) -> None:
    """``consumer.assignment.interval.ms`` (KIP-1263): the broker's 0 until the group sets its own; then a member
    joining within the interval of the group's last target gets that target's epoch and no partitions, and the
    target with its partitions is computed once the interval has passed."""
    admin = _admin(server)
    assert _describe(admin, "paced")["consumer.assignment.interval.ms"].value == "0"
    _alter(admin, "paced", ("consumer.assignment.interval.ms", "1200", AlterConfigOpType.SET))
    described = _describe(admin, "paced")["consumer.assignment.interval.ms"]
    assert (described.value, described.source) == ("1200", ConfigSource.GROUP_CONFIG.value)
    _alter(admin, "unbatched", ("consumer.assignment.interval.ms", "0", AlterConfigOpType.SET))  # (0 is allowed)
    with WireClient(server.port) as client:
        client.call(
            19, 4, topics=[{"name": "t", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                            "configs": []}], timeout_ms=10_000, validate_only=False,
        )  # fmt: skip
        first = _heartbeat(client, "paced")
        began = time.monotonic()
        second = _heartbeat(client, "paced")
        assert (first.member_epoch, second.member_epoch) == (1, 1)
        assert second.assignment is not None and not second.assignment.topic_partitions
        time.sleep(max(0.0, began + 1.5 - time.monotonic()))
        described_group = client.call(DESCRIBE_848, 1, group_ids=["paced"], include_authorized_operations=False)
        assert (described_group.groups[0].group_epoch, described_group.groups[0].assignment_epoch) == (2, 2)


def test_an_empty_group_name_is_an_invalid_request(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        described = client.call(
            DESCRIBE_CONFIGS,
            4,
            resources=[{"resource_type": GROUP, "resource_name": "", "configuration_keys": None}],
            include_synonyms=False,
            include_documentation=False,
        )
        altered = client.call(
            INCREMENTAL_ALTER,
            1,
            resources=[
                {
                    "resource_type": GROUP,
                    "resource_name": "",
                    "configs": [{"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "3000"}],
                }
            ],
            validate_only=False,
        )
    assert described.results[0].error_code == INVALID_REQUEST
    assert altered.responses[0].error_code == INVALID_REQUEST


def test_validate_only_checks_without_storing(server: ServerProcess) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        "g",
        incremental_configs=[
            ConfigEntry("consumer.session.timeout.ms", "5000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin = _admin(server)
    admin.incremental_alter_configs([resource], validate_only=True)[resource].result(20)
    assert _describe(admin, "g")["consumer.session.timeout.ms"].value == str(BROKER_SESSION_MS)


def test_the_group_settings_are_what_its_members_get(server: ServerProcess) -> None:
    """A member of a group with a 700 ms heartbeat interval and a 6 s session is told 700 ms and, once silent,
    outlives the broker's 2 s session and is fenced after its group's 6 s; a member of another group is told
    the broker's 500 ms and fenced after the broker's 2 s."""
    _alter(
        _admin(server),
        "configured",
        ("consumer.session.timeout.ms", "6000", AlterConfigOpType.SET),
        ("consumer.heartbeat.interval.ms", "700", AlterConfigOpType.SET),
    )
    with WireClient(server.port) as client:
        joined = _heartbeat(client, "configured")
        other = _heartbeat(client, "plain")
        silent_since = time.monotonic()
        assert (joined.error_code, _ms(joined.heartbeat_interval)) == (0, 700)
        assert (other.error_code, _ms(other.heartbeat_interval)) == (0, BROKER_HEARTBEAT_MS)
        while other.member_id in _members(client, "plain"):
            assert time.monotonic() < silent_since + 5, "the member outlived the broker's 2 s session"
            time.sleep(0.1)
        assert joined.member_id in _members(client, "configured")  # its group's 6 s session still runs
        while joined.member_id in _members(client, "configured"):
            assert time.monotonic() < silent_since + 12, "the member outlived its group's 6 s session"
            time.sleep(0.1)
        assert time.monotonic() - silent_since >= 5.5  # not fenced before its group's session timeout


def test_settings_survive_a_kill_9_and_apply_after_it(tmp_path: Path) -> None:
    with served(tmp_path, *BROKER_ARGS) as server:
        _alter(_admin(server), "g", ("consumer.heartbeat.interval.ms", "900", AlterConfigOpType.SET))
        server.kill()  # acknowledged above: durable
        server.start()
        assert _describe(_admin(server), "g")["consumer.heartbeat.interval.ms"].value == "900"
        with WireClient(server.port) as client:
            assert _ms(_heartbeat(client, "g").heartbeat_interval) == 900


def test_kafka_python_admin_reads_and_alters_group_settings(server: ServerProcess) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{server.port}")
    group = kafka_admin.ConfigResourceType.GROUP
    try:
        altered = admin.alter_configs(
            [kafka_admin.ConfigResource(group, "kp", configs={"consumer.session.timeout.ms": "6000"})]
        )
        assert altered == {"group": {"kp": "OK"}}
        modified = admin.describe_configs([kafka_admin.ConfigResource(group, "kp")])["group"]["kp"]
        assert list(modified) == ["consumer.session.timeout.ms"]  # the group's own settings only
        assert modified["consumer.session.timeout.ms"]["value"] == "6000"
        assert modified["consumer.session.timeout.ms"]["config_source"] == "DYNAMIC_GROUP_CONFIG"
        every = admin.describe_configs([kafka_admin.ConfigResource(group, "kp")], config_filter="all")["group"]["kp"]
        assert every["consumer.heartbeat.interval.ms"]["value"] == str(BROKER_HEARTBEAT_MS)
        assert every["consumer.heartbeat.interval.ms"]["config_source"] == "DEFAULT_CONFIG"
    finally:
        admin.close()

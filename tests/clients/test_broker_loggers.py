"""The broker's loggers as the BROKER_LOGGER resource (Kafka's ``kafka-configs --entity-type broker-loggers``)
against ``regroup serve``, through kafka-python's ``KafkaAdminClient`` and raw frames: every logger described
with its level; a level set at run time is acted on at once (the server's log shows the debug lines it did
not write before) and unset again; Kafka's refusals for an unknown logger, an unknown level, the root
logger's removal, APPEND, another broker id and the legacy AlterConfigs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, served
from tests.server.wire import WireClient

kafka_admin = pytest.importorskip("kafka.admin")

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER = 32, 33, 44
BROKER_LOGGER = 8
INVALID_CONFIG, INVALID_REQUEST = 40, 42
SET, DELETE, APPEND = 0, 1, 2
DISPATCH = "regroup.server.dispatch"  # logs each request at debug


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with served(tmp_path) as proc:  # --log-level info
        yield proc


def _levels(admin: Any) -> dict[str, str]:
    resource = kafka_admin.ConfigResource(kafka_admin.ConfigResourceType.BROKER_LOGGER, "0")
    described = admin.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
    assert {entry["config_source"] for entry in described.values()} == {"DYNAMIC_BROKER_LOGGER_CONFIG"}
    return {name: entry["value"] for name, entry in described.items()}


def _alter(
    wire: WireClient, *configs: tuple[str, int, str | None], name: str = "0", api: int = INCREMENTAL_ALTER
) -> Any:
    extra = (lambda op: {"config_operation": op}) if api == INCREMENTAL_ALTER else (lambda op: {})
    answer = wire.call(
        api,
        1,
        resources=[
            {
                "resource_type": BROKER_LOGGER,
                "resource_name": name,
                "configs": [{"name": n, "value": v, **extra(op)} for n, op, v in configs],
            }
        ],
        validate_only=False,
    )
    [response] = answer.responses
    return int(response.error_code)


def test_levels_are_described_set_at_once_and_unset(server: ServerProcess) -> None:
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{server.port}")
    try:
        levels = _levels(admin)
        assert levels["root"] == "INFO" and levels[DISPATCH] == "INFO"
        assert "request conn=" not in server.log()  # debug: not written at --log-level info

        resource = kafka_admin.ConfigResource(
            kafka_admin.ConfigResourceType.BROKER_LOGGER, "0", configs={DISPATCH: "DEBUG"}
        )
        assert admin.alter_configs([resource], incremental=True, raise_on_unknown=False) == {
            "broker_logger": {"0": "OK"}
        }
        assert _levels(admin)[DISPATCH] == "DEBUG"  # this very request was logged at debug
        assert "request conn=" in server.log()
        assert _levels(admin)["root"] == "INFO"  # only that logger changed

        with WireClient(server.port) as wire:
            assert _alter(wire, (DISPATCH, DELETE, None)) == 0
        assert _levels(admin)[DISPATCH] == "INFO"  # inherited from root again
        assert "Updated the log level of regroup.server.dispatch to DEBUG" in server.log()
    finally:
        admin.close()


@pytest.mark.parametrize(
    ("configs", "name", "api", "code"),
    [
        ([("no.such.logger", SET, "DEBUG")], "0", INCREMENTAL_ALTER, INVALID_CONFIG),
        ([(DISPATCH, SET, "VERBOSE")], "0", INCREMENTAL_ALTER, INVALID_CONFIG),
        ([("root", DELETE, None)], "0", INCREMENTAL_ALTER, INVALID_REQUEST),
        ([(DISPATCH, APPEND, "DEBUG")], "0", INCREMENTAL_ALTER, INVALID_REQUEST),
        ([(DISPATCH, SET, "DEBUG")], "1", INCREMENTAL_ALTER, INVALID_REQUEST),
        ([(DISPATCH, SET, "DEBUG")], "0", ALTER_CONFIGS, INVALID_REQUEST),  # legacy AlterConfigs: not this type
        # checked whole: a bad second change keeps the first from applying
        ([(DISPATCH, SET, "DEBUG"), ("root", SET, "LOUD")], "0", INCREMENTAL_ALTER, INVALID_CONFIG),
    ],
)
def test_refusals_change_nothing(
    server: ServerProcess, configs: list[tuple[str, int, str | None]], name: str, api: int, code: int
) -> None:
    with WireClient(server.port) as wire:
        assert _alter(wire, *configs, name=name, api=api) == code
        described = wire.call(
            DESCRIBE_CONFIGS,
            4,
            resources=[{"resource_type": BROKER_LOGGER, "resource_name": "0", "configuration_keys": [DISPATCH]}],
            include_synonyms=False,
            include_documentation=False,
        )
    [result] = described.results
    assert [(c.name, c.value) for c in result.configs] == [(DISPATCH, "INFO")]


def test_another_broker_id_is_not_described(server: ServerProcess) -> None:
    with WireClient(server.port) as wire:
        described = wire.call(
            DESCRIBE_CONFIGS,
            4,
            resources=[
                {"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": None}
                for name in ("1", "", "zero")
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    assert [int(r.error_code) for r in described.results] == [INVALID_REQUEST] * 3

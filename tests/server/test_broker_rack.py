"""``broker.rack``: read from ``server.properties`` (trimmed; empty is no rack), carried into the server's
config, every partition's replica racks in the coordinator's cluster image, and DescribeConfigs."""

from __future__ import annotations

import uuid
from pathlib import Path

from regroup.cli.main import _build_parser
from regroup.cli.serve import server_config
from regroup.server.api import TopicInfo
from regroup.server.app import ServerConfig
from regroup.server.broker_configs import broker_config_entries
from regroup.server.image import cluster_image
from regroup.server.properties import parse_properties, server_settings
from regroup.storage.topic_config import ConfigSource


def test_the_file_sets_the_rack() -> None:
    got = server_settings(parse_properties("broker.rack =  eu-1a \n"))
    assert got.fields == {"broker_rack": "eu-1a"} and got.warnings == () and "broker.rack" in got.configured
    assert server_settings(parse_properties("broker.rack=\n")).fields == {"broker_rack": None}
    assert "broker_rack" not in server_settings(parse_properties("num.partitions=2\n")).fields


def test_serve_config_carries_the_rack(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.rack=r1\n")
    config, warnings = server_config(_build_parser().parse_args(["serve", "--config", str(path)]))
    assert (config.broker_rack, warnings) == ("r1", ())
    entry = broker_config_entries(config)["broker.rack"]
    assert (entry.value, entry.source) == ("r1", ConfigSource.STATIC_BROKER_CONFIG)
    default = broker_config_entries(ServerConfig())["broker.rack"]
    assert (default.value, default.source) == (None, ConfigSource.DEFAULT_CONFIG)


def test_every_replica_is_on_the_broker_rack() -> None:
    info = TopicInfo(name="t", topic_id=uuid.uuid4(), partitions=3)
    on_rack = cluster_image({"t": info}, "r1").topic("t")
    assert on_rack is not None and on_rack.racks == (frozenset({"r1"}),) * 3
    no_rack = cluster_image({"t": info}).topic("t")
    assert no_rack is not None and no_rack.racks == ()

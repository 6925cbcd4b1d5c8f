"""Every API the server serves: the ``SPECS`` of each handler module, merged by API key.

``MODULES`` lists them all: the security modules (``sasl``: SaslHandshake and SaslAuthenticate; ``acls``:
CreateAcls, DescribeAcls and DeleteAcls; ``scram_users``: KIP-554's SCRAM credential APIs), the group modules
(classic groups, KIP-848 consumer groups, KIP-932 share groups, offsets, admin) and the data plane (``topics``:
Metadata/CreateTopics/DeleteTopics; ``data``: Produce/Fetch/ListOffsets; ``configs``:
DescribeConfigs/AlterConfigs/IncrementalAlterConfigs; ``records``: DeleteRecords; ``partitions``:
CreatePartitions; ``cluster``: DescribeCluster/DescribeTopicPartitions; ``transactions``: InitProducerId and the
transaction APIs). Each is part of the server: one that fails to import fails the start, and two modules that
claim the same API key are a ``RegistryError``, so a broken module never silently drops its APIs.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from regroup.server.api import ApiSpec

PACKAGE = "regroup.server.handlers"
MODULES = (
    "meta",
    "sasl",
    "acls",
    "scram_users",
    "groups",
    "consumer",
    "share_groups",
    "share_fetch",
    "share_offsets",
    "offsets",
    "admin",
    "topics",
    "data",
    "configs",
    "records",
    "partitions",
    "cluster",
    "transactions",
)


class RegistryError(Exception):
    """The handler modules disagree: two of them serve the same API key."""


def load_specs(modules: Iterable[str] = MODULES) -> dict[int, ApiSpec]:
    """api key -> the spec that serves it, from every handler module."""
    specs: dict[int, ApiSpec] = {}
    for name in modules:
        for spec in importlib.import_module(f"{PACKAGE}.{name}").SPECS:
            if spec.api_key in specs:
                raise RegistryError(f"api key {spec.api_key} of handler module {name} is already served")
            specs[spec.api_key] = spec
    return specs

"""Every API the server serves: the ``SPECS`` of each handler module, merged by API key.

The group-coordination modules of this package (classic groups, KIP-848 consumer groups, offsets, admin)
are always there, and so are the security modules (``sasl``: SaslHandshake and SaslAuthenticate; ``acls``:
CreateAcls, DescribeAcls and DeleteAcls; ``scram_users``: KIP-554's SCRAM credential APIs). The data-plane
modules (``topics``: Metadata/CreateTopics/DeleteTopics; ``data``: Produce/Fetch/ListOffsets; ``configs``:
DescribeConfigs/AlterConfigs/IncrementalAlterConfigs; ``records``: DeleteRecords; ``partitions``:
CreatePartitions; ``cluster``: DescribeCluster/DescribeTopicPartitions; ``transactions``: InitProducerId and
the transaction APIs) are developed separately and imported only if they exist; one that exists but fails to
import is skipped with a warning so the coordinator still serves. If two modules claim the same API key, the
first one listed wins and the clash is logged.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable

from regroup.server.api import ApiSpec

log = logging.getLogger("regroup.server.registry")

PACKAGE = "regroup.server.handlers"
CORE_MODULES = ("meta", "sasl", "acls", "scram_users", "groups", "consumer", "offsets", "admin")
OPTIONAL_MODULES = ("topics", "data", "configs", "records", "partitions", "cluster", "transactions")


def load_specs(core: Iterable[str] = CORE_MODULES, optional: Iterable[str] = OPTIONAL_MODULES) -> dict[int, ApiSpec]:
    """api key -> the spec that serves it, from the core modules and whichever optional modules exist."""
    specs: dict[int, ApiSpec] = {}
    for name in core:
        _merge(specs, name, importlib.import_module(f"{PACKAGE}.{name}").SPECS)
    for name in optional:
        module_name = f"{PACKAGE}.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                log.debug("handler module %s is not installed", module_name)
            else:
                log.warning("handler module %s skipped: %s", module_name, exc)
            continue
        except Exception as exc:
            log.warning("handler module %s skipped: %s: %s", module_name, type(exc).__name__, exc)
            continue
        _merge(specs, name, getattr(module, "SPECS", []))
    return specs


def _merge(specs: dict[int, ApiSpec], module: str, new: Iterable[ApiSpec]) -> None:
    for spec in new:
        if spec.api_key in specs:
            log.error("api key %d of handler module %s is already served; ignored", spec.api_key, module)
            continue
        specs[spec.api_key] = spec

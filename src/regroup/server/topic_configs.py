"""Each topic's configuration overrides, kept durably in ``topics/<name>/config.json`` next to ``topic.json``.

A shell (docs/architecture.md). The file holds a JSON object of configuration names to values, every value
already checked and normalised (:mod:`regroup.storage.topic_config`); a topic without overrides has no file.
CreateTopics' configs are written into the topic's staging directory, so they appear with the topic in the
same atomic rename; AlterConfigs and IncrementalAlterConfigs replace the file atomically (written aside,
fsynced, renamed, the directory fsynced, on the topic store's worker thread) before they answer. A topic's
:class:`LogPolicy` — what the partition log and the cleaning pass do — follows from its overrides and the
broker's defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from regroup.storage.format import CorruptLogError
from regroup.storage.topic_config import BrokerLogDefaults, ConfigError, LogPolicy, validate_topic_configs

__all__ = ["CONFIG_FILE", "TopicConfigs"]

CONFIG_FILE = "config.json"
CONFIG_TMP = CONFIG_FILE + ".tmp"


class TopicConfigs:
    """The overrides of every topic of a store, and the broker defaults behind them."""

    def __init__(self, defaults: BrokerLogDefaults, *, sync: bool) -> None:
        self.defaults = defaults
        self._sync = sync
        self._overrides: dict[str, dict[str, str]] = {}
        self._policies: dict[str, LogPolicy] = {}

    def overrides(self, topic: str) -> dict[str, str]:
        """The topic's overrides (a copy; empty for none)."""
        return dict(self._overrides.get(topic, {}))

    def policy(self, topic: str) -> LogPolicy:
        found = self._policies.get(topic)
        if found is None:
            found = self._policies[topic] = LogPolicy.of(self._overrides.get(topic, {}), self.defaults)
        return found

    def load(self, topic_dir: Path, topic: str) -> None:
        """Read ``config.json`` of a topic being loaded (none: no overrides). Damage raises CorruptLogError."""
        (topic_dir / CONFIG_TMP).unlink(missing_ok=True)
        path = topic_dir / CONFIG_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self._set(topic, {})
            return
        except (OSError, ValueError) as exc:
            raise CorruptLogError(f"{path}: unreadable topic configuration: {exc}") from None
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise CorruptLogError(f"{path}: not an object of configuration names to string values")
        try:
            self._set(topic, validate_topic_configs(raw))
        except ConfigError as exc:
            raise CorruptLogError(f"{path}: {exc}") from None

    def write_new(self, staging_dir: Path, topic: str, configs: Mapping[str, str]) -> None:
        """Write the (checked) configs of a topic being created into its staging directory (the store fsyncs
        that directory before renaming it into place). Registered once the topic exists: :meth:`adopt`."""
        if configs:
            (staging_dir / CONFIG_FILE).write_bytes(self.encoded(configs))

    def adopt(self, topic: str, configs: Mapping[str, str]) -> None:
        self._set(topic, dict(configs))

    @property
    def syncs(self) -> bool:
        """Whether a configuration file's write is fsynced (with its directory)."""
        return self._sync

    @staticmethod
    def encoded(configs: Mapping[str, str]) -> bytes:
        """The file holding ``configs`` (checked already): written with ``write_file_atomically_in`` (as
        ``TopicStore.store_topic_configs`` does, off the event loop), then ``adopt`` ed."""
        return (json.dumps(dict(sorted(configs.items()))) + "\n").encode("utf-8")

    def forget(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        self._policies.pop(topic, None)

    def _set(self, topic: str, configs: dict[str, str]) -> None:
        self._overrides[topic] = configs
        self._policies.pop(topic, None)


def expected_in_topic_dir(name: str) -> bool:
    """Files of a topic directory besides ``topic.json`` and the partition directories."""
    return name in (CONFIG_FILE, CONFIG_TMP)

"""The broker's loggers as the BROKER_LOGGER resource of DescribeConfigs and IncrementalAlterConfigs (Kafka's
``kafka-configs --entity-type broker-loggers``): each logger of this process, described with its effective
level, and changed while the server runs — the change applies at once, is not stored, and a restart goes back
to ``--log-level``.

Names and rules are Kafka's (``RuntimeLoggerManager``): the root logger is ``root``; levels are TRACE, DEBUG,
INFO, WARN, ERROR and FATAL (Python's DEBUG, INFO, WARNING, ERROR and CRITICAL, and a TRACE below DEBUG);
SET needs a logger that exists and one of those levels (INVALID_CONFIG otherwise); DELETE, which makes a
logger inherit its level again, needs a logger that exists and is refused for ``root`` (INVALID_REQUEST);
APPEND and SUBTRACT are INVALID_REQUEST. The whole alteration is checked before anything changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from regroup.storage.topic_config import ConfigError

__all__ = [
    "LEVELS",
    "ROOT",
    "LoggerChange",
    "LoggerRequestError",
    "apply_logger_changes",
    "check_logger_changes",
    "logger_levels",
]

ROOT: Final = "root"
#: Kafka's level names and the Python level each sets
LEVELS: Final = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                 "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}  # fmt: skip
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
#: (operation, logger name, level or None)
LoggerChange = tuple[int, str, str | None]

log = logging.getLogger(__name__)


class LoggerRequestError(ValueError):
    """A change Kafka refuses with INVALID_REQUEST (rather than INVALID_CONFIG)."""


def _kafka_level(level: int) -> str:
    """The name of the highest Kafka level at or below Python level ``level``."""
    name = "TRACE"
    for candidate, value in sorted(LEVELS.items(), key=lambda item: item[1]):
        if value <= level:
            name = candidate
    return name


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def logger_levels() -> dict[str, str]:
    """Every logger of this process (``root`` included) and its effective level, by name."""
    names = [n for n, v in logging.Logger.manager.loggerDict.items() if isinstance(v, logging.Logger)]
    levels = {ROOT: _kafka_level(logging.getLogger().getEffectiveLevel())}
    for name in sorted(names):
        levels[name] = _kafka_level(logging.getLogger(name).getEffectiveLevel())
    return levels


def check_logger_changes(changes: Iterable[LoggerChange]) -> None:
    """Raise :class:`ConfigError` or :class:`LoggerRequestError` for the first change Kafka would refuse."""
    for op, name, level in changes:
        if op in (APPEND, SUBTRACT):
            verb = "APPEND" if op == APPEND else "SUBTRACT"
            raise LoggerRequestError(f"{verb} operation is not allowed for the BROKER_LOGGER resource")
        if op not in (SET, DELETE):
            raise LoggerRequestError(f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")
        if _logger(name) is None:
            raise ConfigError(f"Logger {name} does not exist!")
        if op == DELETE and name == ROOT:
            raise LoggerRequestError("Removing the log level of the root logger is not allowed")
        if op == SET and level not in LEVELS:
            raise ConfigError(
                f"Cannot set the log level of {name} to {level} as it is not a supported log level. "
                f"Valid log levels are {', '.join(sorted(LEVELS))}"
            )


def apply_logger_changes(changes: Iterable[LoggerChange]) -> None:
    """Apply changes :func:`check_logger_changes` accepted."""
    for op, name, level in changes:
        logger = _logger(name)
        if logger is None:  # (checked: cannot happen)
            continue
        if op == SET and level is not None:
            logger.setLevel(LEVELS[level])
            log.warning("Updated the log level of %s to %s", name, level)
        elif op == DELETE:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)

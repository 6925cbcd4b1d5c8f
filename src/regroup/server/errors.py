"""The coordinator runtimes' exceptions, turned into a response (or a closed connection) by the handlers and the
dispatcher: ``CoordinatorUnavailable`` (answer COORDINATOR_NOT_AVAILABLE) and ``RequestDropped`` (close the
connection). The wire's own errors are ``network/errors.py``'s."""

from __future__ import annotations

from regroup.network.errors import CloseConnection


class CoordinatorUnavailable(Exception):
    """The coordinator runtime is stopped or failed (a log append failed): answer COORDINATOR_NOT_AVAILABLE."""


class RequestDropped(CloseConnection):
    """The core superseded a parked request (a newer JoinGroup/SyncGroup from the same member): it will never
    be answered, so the connection that sent it is closed (its client already gave up on it)."""

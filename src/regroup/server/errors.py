"""The server's own exceptions, and ``map_exceptions`` to translate library errors at the edge.

Two families, as in httpcore: ``ProtocolError`` means the *peer* broke the Kafka wire protocol (bad frame,
unknown API, undecodable request) and the only answer is to close that connection; ``CoordinatorUnavailable``
and ``RequestDropped`` come from the coordinator runtime and are turned into a response (or a closed
connection) by the handlers and the connection layer. Callers never see kio's or asyncio's exception types.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager


class ProtocolError(Exception):
    """The peer broke the wire protocol; its connection is closed (other connections are unaffected)."""


class FrameTooLarge(ProtocolError):
    """A size prefix above the configured maximum (or negative)."""


class TruncatedFrame(ProtocolError):
    """The connection ended in the middle of a frame."""


class UnknownApiKey(ProtocolError):
    """An API key this server does not serve. Kafka closes the connection too."""


class UnsupportedApiVersion(ProtocolError):
    """A version outside the advertised range of a served API (ApiVersions excepted, see codec)."""


class MalformedRequest(ProtocolError):
    """The header or body does not decode with the schema of the API and version it claims."""


class CoordinatorUnavailable(Exception):
    """The coordinator runtime is stopped or failed (a log append failed): answer COORDINATOR_NOT_AVAILABLE."""


class RequestDropped(Exception):
    """The core superseded a parked request (a newer JoinGroup/SyncGroup from the same member): it will never
    be answered, so the connection that sent it is closed (its client already gave up on it)."""


@contextmanager
def map_exceptions(mapping: Mapping[type[Exception], type[Exception]]) -> Iterator[None]:
    """Re-raise any exception of a key type as the mapped type (first match wins), chaining the original."""
    try:
        yield
    except Exception as exc:
        for source, target in mapping.items():
            if isinstance(exc, source):
                raise target(str(exc) or type(exc).__name__) from exc
        raise

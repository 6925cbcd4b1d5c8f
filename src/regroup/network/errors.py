"""What ends a connection: ``ProtocolError`` means the peer broke the Kafka wire protocol (bad frame, unknown API,
undecodable request, a request out of turn during authentication) and the only answer is to close that
connection; ``CloseConnection`` is raised by whatever answers requests (``connection.Responder``) when a request
can never be answered and its connection must be closed instead. Other connections are unaffected by either."""

from __future__ import annotations


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


class CloseConnection(Exception):
    """A request that will never be answered: its connection is closed after the responses before it."""

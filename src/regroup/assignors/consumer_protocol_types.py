"""The consumer embedded protocol's plain values: a decoded subscription or assignment and the error for bytes
that are neither. ``consumer_protocol`` (the codec, with its ``struct`` fast paths) and ``consumer_protocol_kio``
(its kio fallbacks) both build and raise these; import them from ``consumer_protocol``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from mypy_extensions import mypyc_attr

#: Newest consumer protocol version this codec knows; newer versions are read with this layout.
HIGHEST_VERSION: Final = 3
#: Generation Kafka reports when none is known.
DEFAULT_GENERATION: Final = -1

Partitions: TypeAlias = Mapping[str, tuple[int, ...]]


@mypyc_attr(native_class=False)  # (a builtin exception base: kept a Python class when compiled)
class ProtocolDecodeError(ValueError):
    """Bytes that are not a valid consumer protocol subscription or assignment."""


# The decoded values are built for every member at every join and sync: they are not frozen (a frozen dataclass
# costs about 10k instructions per object in the compiled build; docs/architecture.md). ``Final`` fields keep
# them immutable for mypy; ``unsafe_hash`` keeps the field-based hash a frozen dataclass has.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class ConsumerProtocolSubscription:
    """A member's JoinGroup metadata: what it wants, what it owns (v1+), its generation (v2+), rack (v3+)."""

    topics: Final[tuple[str, ...]]
    user_data: Final[bytes | None] = None
    owned: Final[Partitions] = field(default_factory=dict)
    generation: Final[int] = DEFAULT_GENERATION
    rack: Final[str | None] = None


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class ConsumerProtocolAssignment:
    """A member's SyncGroup assignment: topic -> partitions, plus the assignor's user data."""

    partitions: Final[Partitions]
    user_data: Final[bytes | None] = None

"""The plug-in API every assignment strategy implements, modelled on Kafka's ``ConsumerPartitionAssignor``.

A strategy has a ``name`` (the JoinGroup protocol name), declares which rebalance protocols it supports,
produces the user data a member puts in its subscription (``metadata``), and computes an assignment
from a ``GroupSpec`` (``assign``). Strategies are pure: no I/O, no clock, no hidden randomness.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final

from mypy_extensions import mypyc_attr

from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, RebalanceProtocol


# (not frozen: a frozen dataclass costs about 10k instructions per object in the compiled build; ``Final`` keeps
# it immutable for mypy and ``unsafe_hash`` keeps a frozen dataclass's field-based hash)
@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class MetadataInput:
    """What a member knows about itself when it builds its subscription (input to ``metadata``)."""

    topics: Final[tuple[str, ...]]
    owned: Final[Mapping[str, tuple[int, ...]]] = field(default_factory=dict)
    generation: Final[int] = NO_GENERATION
    rack: Final[str | None] = None


@mypyc_attr(allow_interpreted_subclasses=True)  # plug-ins subclass it, also when regroup is compiled
class PartitionAssignor(ABC):
    """Base class of every strategy. Subclass it and register it (or expose it through the
    ``regroup.assignors`` entry point group) to add your own."""

    #: JoinGroup protocol name, e.g. ``"range"``.
    name: ClassVar[str] = ""
    #: Rebalance protocols this strategy can run under, most preferred last (Kafka's order).
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: True for strategies the KIP-848 coordinator runs server-side.
    server_side: ClassVar[bool] = False

    def metadata(self, state: MetadataInput) -> bytes | None:
        """User data this member puts in its subscription. Default: none."""
        return None

    @abstractmethod
    def assign(self, spec: GroupSpec) -> Assignment:
        """Compute member -> topic -> sorted partitions; every member of ``spec`` appears."""

    def with_previous(self, spec: GroupSpec) -> GroupSpec:
        """Map the neutral ``owned``/``generation`` fields of ``spec`` into this strategy's native form.

        Used by the CLI and the simulator so one input format serves every strategy. The default keeps them
        as they are (owned partitions, as KIP-429 carries them).
        """
        return spec

    def extra_metrics(self, spec: GroupSpec, assignment: Assignment) -> dict[str, object]:
        """Strategy-specific metrics the CLI adds to the common ones (e.g. consistent-hash imbalance)."""
        return {}

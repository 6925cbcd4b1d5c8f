"""The coordinator's groups as handlers see them: classic groups and consumer groups share one namespace (a
group id is one or the other), plus the cluster image consumer groups resolve their subscriptions against."""

from __future__ import annotations

from dataclasses import dataclass, field

from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.model.cluster import ClusterImage


@dataclass(slots=True)
class Groups:
    classic: dict[str, ClassicGroup] = field(default_factory=dict)
    consumer: dict[str, ConsumerGroup] = field(default_factory=dict)
    image: ClusterImage = field(default_factory=ClusterImage)

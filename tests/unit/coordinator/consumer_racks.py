"""A ``ConsumerHarness`` whose cluster image carries replica racks: ``racked(foo=["r1", "r2", ...])`` creates or
changes topic ``foo`` with one partition per entry, each on the racks given (comma-separated, empty: none)."""

from __future__ import annotations

from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from tests.coordinator.consumer_harness import ConsumerHarness, named

__all__ = ["RackHarness", "named"]


class RackHarness(ConsumerHarness):
    def racked(self, **racks: list[str]) -> None:
        for name, per_partition in racks.items():
            self._image[name] = TopicImage(
                topic_id=topic_id_for(name),
                name=name,
                partitions=len(per_partition),
                racks=tuple(frozenset(r for r in entry.split(",") if r) for entry in per_partition),
            )
        self._collect(self.coordinator.update_metadata(ClusterImage(dict(self._image)), self.now_ms))

    def targets(self) -> dict[str, dict[str, list[int]] | None]:
        """Every member's target by topic name (a member with an empty target maps to {})."""
        return {m: named(t) for m, t in self.cg().targets.items()}

"""The cluster image the coordinator reads (``regroup.model.cluster``), built from the embedded topic store.

KIP-848 consumer groups resolve subscriptions and assignments against topic ids, so the coordinator must
know the same topics, with the same ids, that Metadata reports. The server builds an image from the store at
startup (after the coordinator is loaded) and again after every topic change (created — explicitly or by
Metadata's auto-creation — or deleted), and hands it to the runtime. This is a single-node cluster: every
partition has one replica, on this broker, so its replica racks are ``broker.rack`` when the broker has one
and unknown (an empty rack list) otherwise.

:func:`cluster_image` builds an image from scratch. The server keeps an :class:`ImageFeed` instead, which
keeps the :class:`TopicImage` of every topic whose ``TopicInfo`` did not change since the previous image and
builds only the others: with thousands of topics, a change costs one pass over the names, not one new object
per topic (the images are equal either way).
"""

from __future__ import annotations

from collections.abc import Mapping

from regroup.model.cluster import ClusterImage, TopicImage
from regroup.server.api import TopicInfo

__all__ = ["ImageFeed", "cluster_image"]


def cluster_image(topics: Mapping[str, TopicInfo], rack: str | None = None) -> ClusterImage:
    """The image of ``topics`` (name -> ``TopicInfo``, as ``TopicStore.topics()`` returns them) on a broker in
    ``rack`` (None: no rack)."""
    on_rack = _racks_of(rack)
    return ClusterImage.of(
        TopicImage(topic_id=info.topic_id, name=info.name, partitions=info.partitions, racks=on_rack * info.partitions)
        for info in topics.values()
    )


class ImageFeed:
    """Successive images of a topic store on a broker in ``rack``, each equal to :func:`cluster_image` of the
    topics it is given, reusing the topic images of the topics that did not change."""

    __slots__ = ("_built", "_on_rack")

    def __init__(self, rack: str | None = None) -> None:
        self._on_rack = _racks_of(rack)
        #: name -> (the ``TopicInfo`` its image was built from, that image)
        self._built: dict[str, tuple[TopicInfo, TopicImage]] = {}

    def image(self, topics: Mapping[str, TopicInfo]) -> ClusterImage:
        """The image of ``topics``. A topic whose ``TopicInfo`` is the one (or equal to the one) its kept image
        was built from keeps that image; the others (created, grown, or deleted and created again under a new
        id) get a new one, and the images of topics no longer there are dropped."""
        built = self._built
        by_name: dict[str, TopicImage] = {}
        fresh: dict[str, tuple[TopicInfo, TopicImage]] = {}
        for name, info in topics.items():
            kept = built.get(name)
            if kept is not None and (kept[0] is info or kept[0] == info):
                by_name[name] = kept[1]
                continue
            made = TopicImage(
                topic_id=info.topic_id,
                name=info.name,
                partitions=info.partitions,
                racks=self._on_rack * info.partitions,
            )
            by_name[name] = made
            fresh[name] = (info, made)
        if fresh or len(built) != len(by_name):
            if len(by_name) == len(built) + len(fresh) and not any(name in built for name in fresh):
                built.update(fresh)  # only creations: every kept entry is still there
            else:
                self._built = {name: fresh.get(name) or built[name] for name in by_name}
        return ClusterImage(by_name)


def _racks_of(rack: str | None) -> tuple[frozenset[str], ...]:
    return (frozenset((rack,)),) if rack else ()

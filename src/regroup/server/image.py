"""The cluster image the coordinator reads (``regroup.model.cluster``), built from the embedded topic store.

KIP-848 consumer groups resolve subscriptions and assignments against topic ids, so the coordinator must
know the same topics, with the same ids, that Metadata reports. The server builds an image from the store at
startup (after the coordinator is loaded) and again after every topic change (created — explicitly or by
Metadata's auto-creation — or deleted), and hands it to the runtime. This is a single-node cluster: every
partition has one replica, on this broker, so its replica racks are ``broker.rack`` when the broker has one
and unknown (an empty rack list) otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from regroup.model.cluster import ClusterImage, TopicImage
from regroup.server.api import TopicInfo


def cluster_image(topics: Mapping[str, TopicInfo], rack: str | None = None) -> ClusterImage:
    """The image of ``topics`` (name -> ``TopicInfo``, as ``TopicStore.topics()`` returns them) on a broker in
    ``rack`` (None: no rack)."""
    on_rack = (frozenset((rack,)),) if rack else ()
    return ClusterImage.of(
        TopicImage(topic_id=info.topic_id, name=info.name, partitions=info.partitions, racks=on_rack * info.partitions)
        for info in topics.values()
    )

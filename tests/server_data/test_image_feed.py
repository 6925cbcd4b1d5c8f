"""The cluster image the server hands the coordinator, kept by ``server/image.ImageFeed`` (topics that did not
change keep their ``TopicImage``), equals the image built from scratch (``cluster_image``) after every change of
random sequences of topic creations, deletions (and creations again under the same name), partition additions,
configuration changes and ``TopicStore.batched`` blocks, with and without a broker rack: on plain mappings, and
on a real topic store whose ``on_change`` feeds it as the server wires it."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.model.cluster import ClusterImage
from regroup.server.api import TopicInfo
from regroup.server.image import ImageFeed, cluster_image
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy

NAMES = [f"t{i}" for i in range(8)]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 4)),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just(0)),
        st.tuples(st.just("grow"), st.sampled_from(NAMES), st.integers(1, 3)),
        st.tuples(st.just("config"), st.sampled_from(NAMES), st.integers(1, 10**6)),
        st.tuples(st.just("copy"), st.sampled_from(NAMES), st.just(0)),
        st.tuples(st.just("batch"), st.just(""), st.integers(0, 3)),
    ),
    max_size=30,
)
racks = st.sampled_from([None, "", "rack-a"])


def _same_images_kept(before: ClusterImage, after: ClusterImage, changed: set[str]) -> None:
    for name, image in after.by_name.items():
        if name not in changed and name in before.by_name:
            assert image is before.by_name[name]


@settings(max_examples=300, deadline=None)
@given(steps, racks)
def test_feed_equals_a_rebuild_on_mappings(ops: list[tuple[str, str, int]], rack: str | None) -> None:
    topics: dict[str, TopicInfo] = {}
    feed = ImageFeed(rack)
    previous = feed.image(topics)
    assert previous == cluster_image(topics, rack)
    for op, name, n in ops:
        changed = {name}
        if op == "create" and name not in topics:
            topics[name] = TopicInfo(name, uuid.uuid4(), n)
        elif op == "delete":
            topics.pop(name, None)
        elif op == "grow" and name in topics:
            old = topics[name]
            topics[name] = TopicInfo(name, old.topic_id, old.partitions + n)
        elif op == "copy" and name in topics:  # an equal TopicInfo that is another object: the image is kept
            old = topics[name]
            topics[name] = TopicInfo(old.name, old.topic_id, old.partitions)
            changed = set()
        elif op == "batch":  # several changes before the next image, as inside TopicStore.batched()
            changed = set()
            for i in range(n):
                fresh = f"b{len(topics)}-{i}"
                topics[fresh] = TopicInfo(fresh, uuid.uuid4(), 1 + i)
                changed.add(fresh)
            if topics and n:
                gone = sorted(topics)[0]
                del topics[gone]
        got = feed.image(topics)
        assert got == cluster_image(topics, rack)
        assert list(got.by_name) == list(topics)
        _same_images_kept(previous, got, changed)
        previous = got


@settings(max_examples=40, deadline=None)
@given(steps, racks)
def test_feed_equals_a_rebuild_on_the_store(ops: list[tuple[str, str, int]], rack: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp, TopicStore.open(Path(tmp), fsync=FsyncPolicy.NEVER) as store:
        feed = ImageFeed(rack)
        fed: list[ClusterImage] = []

        def on_change() -> None:
            got = feed.image(store.topics())
            assert got == cluster_image(store.topics(), rack)
            fed.append(got)

        on_change()
        store.on_change = on_change
        for op, name, n in ops:
            exists = store.topic(name) is not None
            if op == "create" and not exists:
                store.create_topic(name, n, {"retention.ms": str(1000 * n)})
            elif op == "delete" and exists:
                store.delete_topic(name)
            elif op == "grow" and exists:
                info = store.topic(name)
                assert info is not None
                store.add_partitions(name, info.partitions + n)
            elif op == "config" and exists:
                store.set_topic_configs(name, {"retention.ms": str(n)})
            elif op == "batch":
                with store.batched():
                    for i in range(n):
                        fresh = f"b{store.generation}x{i}"
                        if store.topic(fresh) is None:
                            store.create_topic(fresh, 1 + i)
                    if n and store.topics():
                        store.delete_topic(sorted(store.topics())[0])
            assert fed[-1] == cluster_image(store.topics(), rack)

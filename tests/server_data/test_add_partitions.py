"""``TopicStore.add_partitions`` (CreatePartitions' store side): the new count is durable and atomic — a
restart shows it, a failure at any step before the rename changes nothing, a crash leaves the old count or
the new one — and the limits and the coordinator's notification apply as for a creation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import regroup.server.topics as topics_module
import regroup.storage.files as files_module
from regroup.server.topics import (
    TooManyPartitionsError,
    TopicStore,
    TotalPartitionsError,
    UnknownTopicError,
)
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch


def test_grown_topic_survives_restart_with_its_data(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        info = store.create_topic("grow", 2)
        old = store.partition("grow", 1)
        assert old is not None
        old.append(make_batch([b"before"]))
        grown = store.add_partitions("grow", 5)
        assert grown.partitions == 5 and grown.topic_id == info.topic_id
        assert store.topic("grow") == grown and store.topic_by_id(info.topic_id) == grown
        assert store.partition_count == 5
        new = store.partition("grow", 4)
        assert new is not None and new.log_end_offset == 0
        new.append(make_batch([b"after", b"after"]))
        assert store.partition("grow", 5) is None
    with TopicStore.open(tmp_path) as store:
        assert store.topics() == {"grow": grown} and store.partition_count == 5
        reopened_old, reopened_new = store.partition("grow", 1), store.partition("grow", 4)
        assert reopened_old is not None and reopened_old.log_end_offset == 1
        assert reopened_new is not None and reopened_new.log_end_offset == 2
        assert list((tmp_path / "staging").iterdir()) == []


def test_other_fields_of_the_topic_metadata_are_kept(tmp_path: Path) -> None:
    """Only the count changes in ``topic.json``: whatever else a topic records there stays."""
    with TopicStore.open(tmp_path) as store:
        store.create_topic("kept", 1)
    meta_path = tmp_path / "topics" / "kept" / "topic.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "extra": {"a": 1}}))
    with TopicStore.open(tmp_path) as store:
        store.add_partitions("kept", 3)
    assert json.loads(meta_path.read_text()) == {**meta, "partitions": 3, "extra": {"a": 1}}


def test_refusals_change_nothing(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path, max_partitions_per_topic=4, max_partitions=6) as store:
        store.create_topic("a", 2)
        store.create_topic("b", 1)
        with pytest.raises(UnknownTopicError):
            store.add_partitions("nope", 3)
        for count in (2, 1, 0, -5):
            with pytest.raises(ValueError, match="not more"):
                store.add_partitions("a", count)
        with pytest.raises(TooManyPartitionsError, match="--max-partitions-per-topic"):
            store.add_partitions("a", 5)
        store.create_topic("c", 2)  # 5 in all
        with pytest.raises(TotalPartitionsError, match="--max-partitions"):
            store.add_partitions("a", 4)
        assert {n: t.partitions for n, t in store.topics().items()} == {"a": 2, "b": 1, "c": 2}
        assert store.partition_count == 5
        assert store.add_partitions("a", 3).partitions == 3  # exactly at the limit of 6
        assert store.partition_count == 6


def test_every_change_is_announced(tmp_path: Path) -> None:
    seen: list[dict[str, int]] = []
    with TopicStore.open(tmp_path) as store:
        store.on_change = lambda: seen.append({n: t.partitions for n, t in store.topics().items()})
        store.create_topic("t", 1)
        store.add_partitions("t", 3)
        with pytest.raises(ValueError):
            store.add_partitions("t", 3)
    assert seen == [{"t": 1}, {"t": 3}]


@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_a_failure_before_the_rename_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """A full disk (or no descriptors left) while the new metadata is written: the topic keeps its count, in
    memory and on disk, and nothing is left in staging."""
    store = TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS)
    info = store.create_topic("t", 2)
    full = OSError(28, "No space left on device")

    def fail(*args: object, **kwargs: object) -> None:
        raise full

    if step == "write":
        monkeypatch.setattr(files_module.os, "write", fail)
    elif step == "fsync":
        monkeypatch.setattr(files_module, "fsync_file", fail)
    else:
        monkeypatch.setattr(topics_module.os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        store.add_partitions("t", 4)
    monkeypatch.undo()
    assert store.topic("t") == info and store.partition_count == 2 and store.partition("t", 2) is None
    assert list((tmp_path / "staging").iterdir()) == []
    store.close()
    with TopicStore.open(tmp_path) as reopened:
        assert reopened.topics() == {"t": info}


def test_a_failed_directory_fsync_follows_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename happened but could not be made durable: the store serves what the directory shows (the new
    count) and raises, so the change is not acknowledged."""
    store = TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS)
    store.create_topic("t", 2)
    seen: list[int] = []
    store.on_change = lambda: seen.append(store.partition_count)

    def fail(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(topics_module.os, "fsync", fail)  # (the directory's: the file's is ``fsync_file``)
    with pytest.raises(OSError, match="Input/output"):
        store.add_partitions("t", 4)
    monkeypatch.undo()
    info = store.topic("t")
    assert info is not None and info.partitions == 4 and seen == [4]
    store.close()
    with TopicStore.open(tmp_path) as reopened:
        assert reopened.topics() == {"t": info}


def test_a_crash_before_the_rename_leaves_the_old_count(tmp_path: Path) -> None:
    """A crash after the new metadata was staged but before it replaced the old: the topic opens with its old
    count and the staged file is cleared away."""
    with TopicStore.open(tmp_path) as store:
        info = store.create_topic("t", 2)
    staged = tmp_path / "staging" / f"{info.topic_id.hex}.json"
    staged.write_text(json.dumps({"name": "t", "topic_id": str(info.topic_id), "partitions": 7}))
    with TopicStore.open(tmp_path) as store:
        assert store.topics() == {"t": info}
        assert not staged.exists()
        assert store.add_partitions("t", 3).partitions == 3

"""A share group through the coordinator's log: every share record survives encoding, the log (with and
without a snapshot) rebuilds the group and its share partitions, and what was acquired but not acknowledged
comes back available, while what was acknowledged stays acknowledged."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.share.group import ShareGroup
from regroup.coordinator.share.partition import ACCEPT, ACKNOWLEDGED, AVAILABLE, AckBatch
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.protocol.share import ShareAcquisition, ShareGroupHeartbeatRequest
from regroup.records import serde
from regroup.records.model import Record
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy

T = uuid.UUID(int=11)
TP = (T, 0)


def busy_coordinator() -> tuple[GroupCoordinator, list[Record]]:
    """Two members; 10 records of partition 0 acquired by m1, 0-3 accepted, 4-9 still held."""
    c = GroupCoordinator()
    c.update_metadata(ClusterImage.of([TopicImage(topic_id=T, name="jobs", partitions=2)]), 0)
    records: list[Record] = []
    for n, member in enumerate(("m1", "m2")):
        req = ShareGroupHeartbeatRequest(group_id="q", member_id=member, subscribed_topic_names=("jobs",))
        records += c.share_group_heartbeat(req, ("hb", n), 10).records
    records += c.initialize_share_partitions("q", {TP: 0, (T, 1): 5}, None, 20).records
    acquired = c.share_acquire("q", "m1", {TP: (0, 10)}, 100, ("acq", 0), 30)
    assert isinstance(acquired.response_for(("acq", 0)), ShareAcquisition)
    records += acquired.records
    records += c.share_acknowledge("q", "m1", {TP: (AckBatch(0, 3, (ACCEPT,)),)}, ("ack", 0), 40).records
    return c, records


def test_every_share_record_survives_encoding() -> None:
    _, records = busy_coordinator()
    kinds = {type(r.key).__name__ for r in records}
    assert {"ShareGroupMetadataKey", "ShareGroupMemberMetadataKey", "SharePartitionStateKey"} <= kinds
    for record in [*records, *(Record(r.key, None) for r in records)]:
        assert serde.decode(serde.encode(record)) == record


@pytest.mark.parametrize("snapshot", [False, True])
def test_the_log_rebuilds_the_group_and_its_share_partitions(tmp_path: Path, snapshot: bool) -> None:
    live, records = busy_coordinator()
    log = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    log.append(records)
    if snapshot:
        log.snapshot(live.snapshot_records())
    log.close()
    reopened = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    rebuilt = reopened.load(1_000)
    reopened.close()
    assert rebuilt.hard_state() == live.hard_state()
    group = rebuilt.groups.typed("q", ShareGroup)
    assert group is not None and set(group.members) == {"m1", "m2"}
    partition = group.partitions[TP]
    assert partition.start_offset == 4  # 0-3 were accepted: done for good
    states = {entry.offset: (entry.state, entry.delivery_count) for entry in partition.in_flight()}
    assert states == {offset: (AVAILABLE, 1) for offset in range(4, 10)}  # held, not durable: available again
    assert all(state != ACKNOWLEDGED for state, _ in states.values())
    assert group.partitions[(T, 1)].start_offset == 5
    # the acknowledged offsets are not acquired again; the held ones are, by anyone, at delivery count 2
    again = rebuilt.share_acquire("q", "m2", {TP: (0, 10)}, 100, ("acq", 1), 2_000).response_for(("acq", 1))
    assert again.acquired == {TP: ((4, 9, 2),)}

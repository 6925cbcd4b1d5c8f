"""The coordinator's records keep their on-disk bytes: ``serde.encode`` (orjson, with the standard library's
encoder for what orjson would write differently) produces exactly what ``json.dumps(doc, separators=(",", ":"),
sort_keys=True)`` did, and a log written by that encoder still loads."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.records import serde
from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
)
from regroup.records.share import SharePartitionStateBatch, SharePartitionStateKey, SharePartitionStateValue
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import RecordLog


def json_only(record: Record, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """``record`` as the encoder wrote it before orjson: the standard library's ``json`` only."""
    with monkeypatch.context() as m:
        m.setattr(serde.orjson, "dumps", _refuse)
        return serde.encode(record)


def _refuse(*args: object, **kwargs: object) -> bytes:
    raise TypeError("orjson switched off")


def offset_record(group: str, metadata: str, offset: int = 42, pending: bool = False) -> Record:
    key: OffsetCommitKey | PendingOffsetCommitKey
    if pending:
        key = PendingOffsetCommitKey(producer_id=7, group_id=group, topic="t", partition=3)
    else:
        key = OffsetCommitKey(group_id=group, topic="t", partition=3)
    return Record(
        key,
        OffsetCommitValue(
            offset=offset, leader_epoch=-1, metadata=metadata, commit_timestamp_ms=1_764_400_000_000,
            expire_timestamp_ms=None,
        ),
    )  # fmt: skip


def group_record(member: str, host: str) -> Record:
    m = MemberMetadata(
        member_id=member, group_instance_id=None, client_id="c", client_host=host, rebalance_timeout_ms=300_000,
        session_timeout_ms=45_000, subscription=b"\x00\x01sub", assignment=b"",
    )  # fmt: skip
    value = GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol_name="range", leader=member,
        current_state_timestamp_ms=1_764_400_000_000, members=(m,),
    )  # fmt: skip
    return Record(GroupMetadataKey(group_id="g"), value)


ODD = ["", "plain", "ünïcødé", "emoji 🎉", "tab\tnew\nline", "\x00\x1f\x7f", 'quote " back \\ slash /', "\ud800"]


@pytest.mark.parametrize("text", ODD)
def test_the_bytes_are_those_of_the_json_encoder(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [
        offset_record(text, text),
        offset_record("g", text, pending=True),
        offset_record(text, "", offset=2**70),  # (beyond 64 bits: orjson refuses, json does not)
        Record(OffsetCommitKey(group_id=text, topic="t", partition=0), None),
        group_record(text, text),
        Record(GroupMetadataKey(group_id=text), None),
    ]
    for record in records:
        assert serde.encode(record) == json_only(record, monkeypatch)


@settings(max_examples=200, deadline=None)
@given(group=st.text(max_size=20), metadata=st.text(max_size=40), offset=st.integers(-1, 2**63 - 1))
def test_any_text_encodes_as_the_json_encoder_did(group: str, metadata: str, offset: int) -> None:
    record = offset_record(group, metadata, offset)
    reference = json.dumps(
        {
            "k": "offset", "group": group, "topic": "t", "partition": 3,
            "v": {"offset": offset, "leader_epoch": -1, "metadata": metadata, "commit_ts": 1_764_400_000_000,
                  "expire_ts": None},
        },
        separators=(",", ":"), sort_keys=True,
    ).encode("utf-8")  # fmt: skip
    assert serde.encode(record) == reference
    assert serde.decode(reference) == record


def test_a_log_written_by_the_json_encoder_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [offset_record(text, text) for text in ODD if text != "\ud800"] + [group_record("m-ü", "h")]
    with RecordLog.open(tmp_path / "log") as old:
        old.append([json_only(r, monkeypatch) for r in records])
    log_ = CoordinatorLog.open(tmp_path / "log")
    try:
        assert list(log_.records()) == records
        log_.append(records)  # (the current encoder: the same bytes again)
        payloads = [payload for _, payload in log_.log.read(0)]
        assert payloads[: len(records)] == payloads[len(records) :]
    finally:
        log_.close()


ANY_CHARACTER = st.text(st.characters(blacklist_categories=()), max_size=12)  # surrogates and controls too
INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(
    group=ANY_CHARACTER,
    topic=ANY_CHARACTER,
    metadata=ANY_CHARACTER,
    partition=st.integers(-(2**31), 2**31 - 1),
    offset=st.one_of(INT64, st.integers(2**63, 2**80)),
    epoch=st.integers(-(2**31), 2**31 - 1),
    committed=INT64,
    expires=st.none() | INT64,
)
def test_an_offset_commit_written_from_its_template_is_the_json_encoders_document(
    group: str, topic: str, metadata: str, partition: int, offset: int, epoch: int, committed: int, expires: int | None
) -> None:
    """Offset commit records are written straight into a template (``serde._offset_commit``): every field, any
    character and any integer give the bytes ``json.dumps`` gives for the record's document."""
    record = Record(
        OffsetCommitKey(group_id=group, topic=topic, partition=partition),
        OffsetCommitValue(offset, epoch, metadata, committed, expires),
    )
    reference = json.dumps(
        {
            "k": "offset", "group": group, "topic": topic, "partition": partition,
            "v": {"offset": offset, "leader_epoch": epoch, "metadata": metadata, "commit_ts": committed,
                  "expire_ts": expires},
        },
        separators=(",", ":"), sort_keys=True,
    ).encode("utf-8")  # fmt: skip
    assert serde._offset_commit(record.key, record.value) == reference  # type: ignore[arg-type]
    assert serde.encode(record) == reference


def test_a_field_of_another_type_is_written_the_general_way() -> None:
    """A bool (JSON ``true``) or an int subclass is not what the template writes: the general encoder does."""
    odd = Record(OffsetCommitKey(group_id="g", topic="t", partition=True), OffsetCommitValue(1, -1, "", 2, None))
    assert serde._offset_commit(odd.key, odd.value) is None  # type: ignore[arg-type]
    assert (
        serde.encode(odd) == b'{"group":"g","k":"offset","partition":true,"topic":"t","v":{"commit_ts":2,'
        b'"expire_ts":null,"leader_epoch":-1,"metadata":"","offset":1}}'
    )


BATCH = st.tuples(INT64, INT64, st.integers(-128, 127), st.integers(-(2**15), 2**15 - 1))


@settings(max_examples=300, deadline=None)
@given(
    group=ANY_CHARACTER,
    topic_id=st.uuids(),
    partition=st.integers(-(2**31), 2**31 - 1),
    start=st.one_of(INT64, st.integers(2**63, 2**80)),
    batches=st.none() | st.lists(BATCH, max_size=5),
)
def test_a_share_partition_state_written_from_its_template_is_the_json_encoders_document(
    group: str, topic_id: uuid.UUID, partition: int, start: int, batches: list[tuple[int, int, int, int]] | None
) -> None:
    """Share partition state records are written straight into a template (``serde._share_state``): every
    field, any character, any integer, any number of batches and a deleted state (no value) give the bytes
    ``json.dumps`` gives for the record's document, and read back as the record."""
    key = SharePartitionStateKey(group_id=group, topic_id=topic_id, partition=partition)
    value = None
    if batches is not None:
        value = SharePartitionStateValue(
            start_offset=start, batches=tuple(SharePartitionStateBatch(
                first_offset=f, last_offset=la, state=s, delivery_count=c) for f, la, s, c in batches),
        )  # fmt: skip
    document = None if batches is None else {"start": start, "batches": [list(b) for b in batches]}
    reference = json.dumps(
        {"k": "sg-state", "group": group, "topic": str(topic_id), "partition": partition, "v": document},
        separators=(",", ":"), sort_keys=True,
    ).encode("utf-8")  # fmt: skip
    record = Record(key, value)
    assert serde._share_state(key, value) == reference
    assert serde.encode(record) == reference
    assert serde.decode(reference) == record


def test_a_share_state_field_of_another_type_is_written_the_general_way() -> None:
    """A bool delivery count or a list of batches is not what the share state template writes: the general
    encoder does, with the general encoder's bytes."""
    topic_id = uuid.UUID(int=7)
    key = SharePartitionStateKey(group_id="g", topic_id=topic_id, partition=1)
    odd = SharePartitionStateValue(
        start_offset=3, batches=(SharePartitionStateBatch(first_offset=3, last_offset=4, state=0, delivery_count=True),)
    )
    assert serde._share_state(key, odd) is None
    assert serde.encode(Record(key, odd)) == (
        b'{"group":"g","k":"sg-state","partition":1,"topic":"%s","v":{"batches":[[3,4,0,true]],"start":3}}'
        % str(topic_id).encode()
    )
    listed = SharePartitionStateValue(start_offset=3, batches=[])  # type: ignore[arg-type]
    assert serde._share_state(key, listed) is None
    assert serde.encode(Record(key, listed)).endswith(b'"v":{"batches":[],"start":3}}')

"""Records to and from bytes: one JSON object per record (bytes fields base64), stable and readable.

The format is self-describing (``"k"`` names the key type) so the lab and humans can read a log without
this package; ``decode`` rejects anything it does not recognise with ``RecordDecodeError``.

The bytes are compact JSON with sorted keys and every character outside printable ASCII escaped, as
``json.dumps(doc, separators=(",", ":"), sort_keys=True)`` writes them. ``orjson`` produces them (many times
faster; ``encode`` runs for every record of every commit); for the rare document where its output would
differ (other characters, which it writes as raw UTF-8, or a value it cannot encode) the standard library's
encoder does it instead, so the bytes stay those of the plain ``json`` encoder. An offset commit record, most
of a coordinator log, and a share partition's state record, most of a share group's (one per partition of
every acknowledgement, and every partition of every share group in a snapshot), are written straight into a
template of their documents, their strings quoted by ``json``'s own quoting function (the same bytes,
property-tested)."""

from __future__ import annotations

import base64
import json
import uuid
from json.encoder import encode_basestring_ascii
from typing import Any

import orjson

from regroup.records.consumer import CONSUMER_KEY_TYPES
from regroup.records.consumer_serde import KEY_OF_KIND, decode_consumer, encode_consumer
from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)
from regroup.records.share import SHARE_KEY_TYPES, SharePartitionStateKey, SharePartitionStateValue
from regroup.records.share_serde import SHARE_KEY_OF_KIND, decode_share, encode_share


class RecordDecodeError(ValueError):
    """The bytes are not a record this version understands."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _dumps(doc: dict[str, Any]) -> bytes:
    """``doc`` as ``json.dumps(doc, separators=(",", ":"), sort_keys=True)`` encodes it, in UTF-8."""
    try:
        out = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        out = b""
    if out and out.isascii() and b"\x7f" not in out:  # (json escapes DEL and all non-ASCII; orjson does not)
        return out
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")


#: an offset commit's document, as ``_dumps`` writes it: the keys sorted, the strings quoted by json's own
#: quoting (``_quoted``), every number a plain int
_OFFSET = (
    b'{"group":%s,"k":"offset","partition":%d,"topic":%s,'
    b'"v":{"commit_ts":%d,"expire_ts":%s,"leader_epoch":%d,"metadata":%s,"offset":%d}}'
)
_QUOTED: dict[str, bytes] = {}
_QUOTED_MAX = 4096


def _quoted(text: str) -> bytes:
    """``text`` as a JSON string, as ``json.dumps`` writes it (non-ASCII and DEL escaped); remembered, since a
    log's records name the same groups and topics over and over (bounded)."""
    quoted = _QUOTED.get(text)
    if quoted is None:
        quoted = encode_basestring_ascii(text).encode("ascii")
        if len(_QUOTED) >= _QUOTED_MAX:
            _QUOTED.clear()
        _QUOTED[text] = quoted
    return quoted


def _offset_commit(key: OffsetCommitKey, value: OffsetCommitValue) -> bytes | None:
    """An offset commit record's bytes written directly, the same bytes ``_dumps`` gives for its document (most
    of a coordinator log's records are these: one per partition of every commit); None when a field is not of
    the plain type the template writes (``encode``'s general way then)."""
    partition, offset, epoch = key.partition, value.offset, value.leader_epoch
    committed, expires, metadata = value.commit_timestamp_ms, value.expire_timestamp_ms, value.metadata
    if not (
        type(partition) is int
        and type(offset) is int
        and type(epoch) is int
        and type(committed) is int
        and (expires is None or type(expires) is int)
        and type(metadata) is str
        and type(key.group_id) is str
        and type(key.topic) is str
    ):
        return None
    return _OFFSET % (
        _quoted(key.group_id),
        partition,
        _quoted(key.topic),
        committed,
        b"null" if expires is None else b"%d" % expires,
        epoch,
        b'""' if not metadata else encode_basestring_ascii(metadata).encode("ascii"),
        offset,
    )


#: a share partition's state document, as ``_dumps`` writes it (its value's batches joined in, or null)
_SHARE_STATE = b'{"group":%s,"k":"sg-state","partition":%d,"topic":%s,"v":%s}'
_SHARE_STATE_VALUE = b'{"batches":[%s],"start":%d}'
_SHARE_BATCH = b"[%d,%d,%d,%d]"
_TOPIC_IDS: dict[uuid.UUID, bytes] = {}


def _share_state(key: SharePartitionStateKey, value: SharePartitionStateValue | None) -> bytes | None:
    """A share partition's state record's bytes written directly, the same bytes ``_dumps`` gives for its
    document; None when a field is not of the plain type the template writes (``encode``'s general way then)."""
    partition, topic_id = key.partition, key.topic_id
    if not (type(partition) is int and type(key.group_id) is str and type(topic_id) is uuid.UUID):
        return None
    topic = _TOPIC_IDS.get(topic_id)
    if topic is None:
        topic = b'"%s"' % str(topic_id).encode("ascii")
        if len(_TOPIC_IDS) >= _QUOTED_MAX:
            _TOPIC_IDS.clear()
        _TOPIC_IDS[topic_id] = topic
    if value is None:
        return _SHARE_STATE % (_quoted(key.group_id), partition, topic, b"null")
    start, batches = value.start_offset, value.batches
    if type(start) is not int or type(batches) is not tuple:
        return None
    written = []
    for batch in batches:
        first, last, state, count = batch.first_offset, batch.last_offset, batch.state, batch.delivery_count
        if not (type(first) is int and type(last) is int and type(state) is int and type(count) is int):
            return None
        written.append(_SHARE_BATCH % (first, last, state, count))
    return _SHARE_STATE % (
        _quoted(key.group_id),
        partition,
        topic,
        _SHARE_STATE_VALUE % (b",".join(written), start),
    )


def encode(record: Record) -> bytes:
    key, value = record.key, record.value
    if type(key) is OffsetCommitKey and type(value) is OffsetCommitValue:
        written = _offset_commit(key, value)
        if written is not None:
            return written
    elif type(key) is SharePartitionStateKey and (value is None or type(value) is SharePartitionStateValue):
        written = _share_state(key, value)
        if written is not None:
            return written
    doc: dict[str, Any]
    if isinstance(key, CONSUMER_KEY_TYPES):
        doc = encode_consumer(key, value)  # type: ignore[arg-type]
        return _dumps(doc)
    if isinstance(key, SHARE_KEY_TYPES):
        doc = encode_share(key, value)  # type: ignore[arg-type]
        return _dumps(doc)
    if isinstance(key, TxnMarkerKey):
        committed = isinstance(value, TxnMarkerValue) and value.committed
        return _dumps(
            {"k": "txn-marker", "producer": key.producer_id, "group": key.group_id, "v": {"committed": committed}}
        )
    if isinstance(key, GroupMetadataKey):
        doc = {"k": "group", "group": key.group_id}
        if isinstance(value, GroupMetadataValue):
            doc["v"] = {
                "protocol_type": value.protocol_type,
                "generation": value.generation,
                "protocol_name": value.protocol_name,
                "leader": value.leader,
                "state_ts": value.current_state_timestamp_ms,
                "members": [
                    {
                        "id": m.member_id,
                        "instance": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "rebalance_ms": m.rebalance_timeout_ms,
                        "session_ms": m.session_timeout_ms,
                        "subscription": _b64(m.subscription),
                        "assignment": _b64(m.assignment),
                    }
                    for m in value.members
                ],
            }
    else:
        doc = {"k": "offset", "group": key.group_id, "topic": key.topic, "partition": key.partition}
        if isinstance(key, PendingOffsetCommitKey):
            doc["k"] = "pending-offset"
            doc["producer"] = key.producer_id
        if isinstance(value, OffsetCommitValue):
            doc["v"] = {
                "offset": value.offset,
                "leader_epoch": value.leader_epoch,
                "metadata": value.metadata,
                "commit_ts": value.commit_timestamp_ms,
                "expire_ts": value.expire_timestamp_ms,
            }
    if value is None:
        doc["v"] = None
    return _dumps(doc)


def decode(data: bytes) -> Record:
    try:
        doc = json.loads(data)
        kind = doc["k"]
        v = doc["v"]
        if kind in KEY_OF_KIND:
            ckey, cvalue = decode_consumer(doc)
            return Record(ckey, cvalue)
        if kind in SHARE_KEY_OF_KIND:
            skey, svalue = decode_share(doc)
            return Record(skey, svalue)
        if kind == "group":
            key = GroupMetadataKey(group_id=str(doc["group"]))
            if v is None:
                return Record(key, None)
            members = tuple(
                MemberMetadata(
                    member_id=str(m["id"]),
                    group_instance_id=m["instance"],
                    client_id=str(m["client_id"]),
                    client_host=str(m["host"]),
                    rebalance_timeout_ms=int(m["rebalance_ms"]),
                    session_timeout_ms=int(m["session_ms"]),
                    subscription=_unb64(m["subscription"]),
                    assignment=_unb64(m["assignment"]),
                )
                for m in v["members"]
            )
            return Record(
                key,
                GroupMetadataValue(
                    protocol_type=v["protocol_type"],
                    generation=int(v["generation"]),
                    protocol_name=v["protocol_name"],
                    leader=v["leader"],
                    current_state_timestamp_ms=int(v["state_ts"]),
                    members=members,
                ),
            )
        if kind == "txn-marker":
            committed = v["committed"]
            if not isinstance(committed, bool):
                raise TypeError(f"a transaction marker's outcome is a boolean, not {committed!r}")
            mkey = TxnMarkerKey(producer_id=int(doc["producer"]), group_id=str(doc["group"]))
            return Record(mkey, TxnMarkerValue(committed=committed))
        if kind in ("offset", "pending-offset"):
            okey: OffsetCommitKey | PendingOffsetCommitKey
            if kind == "offset":
                okey = OffsetCommitKey(
                    group_id=str(doc["group"]), topic=str(doc["topic"]), partition=int(doc["partition"])
                )
            else:
                okey = PendingOffsetCommitKey(
                    producer_id=int(doc["producer"]),
                    group_id=str(doc["group"]),
                    topic=str(doc["topic"]),
                    partition=int(doc["partition"]),
                )
            if v is None:
                return Record(okey, None)
            return Record(
                okey,
                OffsetCommitValue(
                    offset=int(v["offset"]),
                    leader_epoch=int(v["leader_epoch"]),
                    metadata=str(v["metadata"]),
                    commit_timestamp_ms=int(v["commit_ts"]),
                    expire_timestamp_ms=None if v["expire_ts"] is None else int(v["expire_ts"]),
                ),
            )
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordDecodeError(f"not a regroup record: {exc}") from None
    raise RecordDecodeError(f"unknown record kind {kind!r}")

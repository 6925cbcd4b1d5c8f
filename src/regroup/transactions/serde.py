"""Transaction records to and from bytes: one JSON object per record, readable without this package
(``"k": "txn"``, the transactional id, and the metadata or ``null``). ``decode`` refuses anything else with
``TxnRecordDecodeError``."""

from __future__ import annotations

import json
from typing import Any

from regroup.transactions.records import TxnRecord
from regroup.transactions.state import TransactionMetadata, TxnState

__all__ = ["TxnRecordDecodeError", "decode", "encode"]

KIND = "txn"


class TxnRecordDecodeError(ValueError):
    """The bytes are not a transaction record this version understands."""


def encode(record: TxnRecord) -> bytes:
    doc: dict[str, Any] = {"k": KIND, "id": record.transactional_id, "v": None}
    m = record.value
    if m is not None:
        doc["v"] = {
            "pid": m.producer_id,
            "prev_pid": m.previous_producer_id,
            "epoch": m.producer_epoch,
            "last_epoch": m.last_producer_epoch,
            "timeout_ms": m.timeout_ms,
            "state": m.state.value,
            "partitions": sorted([t, p] for t, p in m.partitions),
            "groups": sorted(m.groups),
            "start_ms": m.start_ms,
            "update_ms": m.last_update_ms,
        }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode(data: bytes) -> TxnRecord:
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("k") != KIND or not isinstance(doc.get("id"), str):
            raise TxnRecordDecodeError(f"not a transaction record: {data[:80]!r}")
        v = doc["v"]
        if v is None:
            return TxnRecord(doc["id"], None)
        metadata = TransactionMetadata(
            transactional_id=doc["id"],
            producer_id=_int(v["pid"]),
            previous_producer_id=_int(v["prev_pid"]),
            producer_epoch=_int(v["epoch"]),
            last_producer_epoch=_int(v["last_epoch"]),
            timeout_ms=_int(v["timeout_ms"]),
            state=TxnState(v["state"]),
            partitions=frozenset((_str(t), _int(p)) for t, p in v["partitions"]),
            groups=frozenset(_str(g) for g in v["groups"]),
            start_ms=_int(v["start_ms"]),
            last_update_ms=_int(v["update_ms"]),
        )
    except TxnRecordDecodeError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise TxnRecordDecodeError(f"bad transaction record {data[:80]!r}: {exc}") from exc
    return TxnRecord(metadata.transactional_id, metadata)


def _int(value: object) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, not {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {value!r}")
    return value

"""Transactional produce against idempotent produce on ``regroup serve``, side by side in one run.

Usage::

    .venv/bin/python bench/transactions.py                          # --fsync always and never, 10 s per round
    .venv/bin/python bench/transactions.py --fsync always --seconds 5 --rounds 2
    .venv/bin/python bench/transactions.py --json /tmp/bench-txn.json

For each fsync policy the harness starts ``regroup serve`` (``bench/server.py``'s ``ServerProcess``: loopback,
a temporary data directory) and creates one topic of ``--partitions`` partitions. Then, with confluent-kafka
(librdkafka), the real client:

* **transactional**: a producer with a ``transactional.id``; each transaction is ``begin_transaction``, 100
  records (``--per-txn``) spread round-robin over the partitions, ``commit_transaction`` (which flushes the
  records, then EndTxn: the coordinator's PrepareCommit record, a COMMIT marker per partition, the
  CompleteCommit record — each fsynced under ``always``);
* **idempotent**: a producer with ``enable.idempotence`` (acks=all) sending the same 100 records and then
  ``flush()``, so both cases wait for the same batch of records at the same points — the difference is the
  transaction's own work.

Each case runs for ``--seconds`` after a one-second warm-up, ``--rounds`` times in the order idempotent,
transactional, transactional, idempotent, ... so that a drift in the machine's load hits both alike. Reported
per case: records per second and batches (transactions) per second, the medians over the rounds, the server's
CPU seconds per 1,000 records, and the ratio transactional / idempotent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from server_loader import load_server_bench

sb = load_server_bench()
VALUE = b"v" * 100


def _run_case(
    bootstrap: str, topic: str, partitions: int, per_txn: int, seconds: float, transactional: bool
) -> dict[str, float]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 1}
    if transactional:
        config["transactional.id"] = "bench-" + uuid.uuid4().hex[:8]
    else:
        config.update({"enable.idempotence": True, "acks": "all"})
    producer = ck.Producer(config)
    if transactional:
        producer.init_transactions(30)

    def batch(n: int) -> None:
        if transactional:
            producer.begin_transaction()
        for i in range(per_txn):
            producer.produce(topic, VALUE, partition=(n * per_txn + i) % partitions)
        if transactional:
            producer.commit_transaction(60)
        elif producer.flush(60):
            raise RuntimeError("records left undelivered")

    warm_end = time.monotonic() + 1.0
    n = 0
    while time.monotonic() < warm_end:
        batch(n)
        n += 1
    batches, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        batch(n + batches)
        batches += 1
    elapsed = time.monotonic() - start
    return {"batches_per_s": batches / elapsed, "records_per_s": batches * per_txn / elapsed, "batches": batches}


def run_policy(fsync: str, args: argparse.Namespace) -> dict[str, Any]:
    server = sb.ServerProcess(fsync, args.data_root)
    server.start()
    try:
        bootstrap = f"{sb.HOST}:{server.port}"
        topic = "bench-txn-" + uuid.uuid4().hex[:6]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(20)
        results: dict[str, list[dict[str, float]]] = {"idempotent": [], "transactional": []}
        cpu: dict[str, float] = {"idempotent": 0.0, "transactional": 0.0}
        order = ["idempotent", "transactional", "transactional", "idempotent"]
        for r in range(args.rounds):
            case = order[r % len(order)]
            for name in (case, "transactional" if case == "idempotent" else "idempotent"):
                before = server.cpu_seconds()
                row = _run_case(bootstrap, topic, args.partitions, args.per_txn, args.seconds, name == "transactional")
                cpu[name] += server.cpu_seconds() - before
                results[name].append(row)
                print(f"  {fsync:6} round {r + 1} {name:13} {row['records_per_s']:9.0f} records/s "
                      f"{row['batches_per_s']:7.1f} batches/s", flush=True)  # fmt: skip
    finally:
        server.stop()
    summary: dict[str, Any] = {"fsync": fsync}
    for name, rows in results.items():
        records = sum(row["batches"] for row in rows) * args.per_txn
        summary[name] = {
            "records_per_s": statistics.median(row["records_per_s"] for row in rows),
            "batches_per_s": statistics.median(row["batches_per_s"] for row in rows),
            # (includes the one-second warm-ups: CPU per record over the whole case)
            "server_cpu_s_per_1000_records": 1000 * cpu[name] / max(records, 1),
            "rounds": rows,
        }
    summary["ratio"] = summary["transactional"]["records_per_s"] / summary["idempotent"]["records_per_s"]
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fsync", default="always,never", help="comma-separated policies (default always,never)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per round and case")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per case (alternated)")
    parser.add_argument("--per-txn", type=int, default=100, help="records per transaction (and per flush)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--data-root", default=None, help="where the temporary data directories go")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args()
    summaries = []
    for fsync in [p for p in args.fsync.split(",") if p]:
        print(f"fsync {fsync}: {args.per_txn} records per transaction, {args.partitions} partitions", flush=True)
        summaries.append(run_policy(fsync, args))
    print()
    print(f"{'fsync':6} {'case':13} {'records/s':>10} {'txn or flush/s':>15} {'server CPU s/1k rec':>20}")
    for s in summaries:
        for name in ("idempotent", "transactional"):
            row = s[name]
            print(f"{s['fsync']:6} {name:13} {row['records_per_s']:10.0f} {row['batches_per_s']:15.1f} "
                  f"{row['server_cpu_s_per_1000_records']:20.3f}")  # fmt: skip
        print(f"{s['fsync']:6} {'ratio':13} {s['ratio']:10.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(summaries, indent=2))


if __name__ == "__main__":
    main()

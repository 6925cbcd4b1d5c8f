"""One real share consumer process for ``regroup lab validate``: confluent-kafka's ``ShareConsumer`` (librdkafka,
KIP-932, implicit acknowledgement) following a scenario share member's application model, writing what it acquired
and acknowledged, with times.

Run as ``python -m regroup.lab.real_share_member CONFIG.json``; the orchestrator (``lab.real_run``) writes the
config. The process builds its consumer first (and says ``ready``), then subscribes when the orchestrator creates
its ``go_file`` (at the scenario's join), so the start-up of Python and librdkafka does not delay the join.

The loop is the simulated share member's (``client.share_member``): ``poll()`` acknowledges the records of the
previous poll (implicit mode: ACCEPT, sent with the ShareFetch the poll triggers) and returns what that fetch
acquired, at most ``max.poll.records``; the application then processes them for the model's drawn time
(``AppModel.records_ms``) before polling again. With nothing to hand out, ``poll()`` waits (librdkafka keeps a
ShareFetch waiting at the broker for up to ``fetch.wait.max.ms``).

Output, JSON lines in ``out``: ``{"t": ms, "kind": ..., ...}`` with ``kind`` ``ready``, ``subscribed``, ``poll``
(a poll starts: the acknowledgements of the last batch go out), ``records`` (a poll returned them: ``records``
``[[topic, partition, offset, delivery count], ...]``), ``acked`` (the acknowledgement callback:
``records`` ``[[topic, partition, offset], ...]`` and ``error``, null when the broker took them), ``closed``,
``commit`` (the close's ``commit_sync`` sends the last acknowledgements), ``error`` (``detail``). SIGTERM
finishes the batch in hand, acknowledges it and closes the consumer (its share session and its membership end);
SIGKILL is a crash.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from regroup.client.app import AppModel

#: how long one poll waits for records at most
POLL_S = 0.1
#: how often a ready process looks for its go file
GO_POLL_S = 0.002


class ShareMember:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.app = AppModel(**{**config["app"], "processing": tuple(config["app"]["processing"])})
        self.draws = random.Random(config["seed"])
        self.stopping = False
        self.out: IO[str] = Path(config["out"]).open("a", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed by run)

    def record(self, kind: str, **fields: Any) -> None:
        self.out.write(json.dumps({"t": time.time() * 1000, "kind": kind, **fields}) + "\n")

    def stop(self, *_: object) -> None:
        self.stopping = True

    def on_acknowledged(self, offsets: dict[Any, Any], exc: Any) -> None:
        """The broker's answer to acknowledgements (librdkafka calls it inside ``poll()`` and ``commit_sync()``)."""
        records = sorted([tp.topic, tp.partition, offset] for tp, found in offsets.items() for offset in found)
        self.record("acked", records=records, error=None if exc is None else str(exc))

    def settings(self) -> dict[str, Any]:
        c = self.config
        return {
            "bootstrap.servers": c["bootstrap"],
            "group.id": c["group"],
            "client.id": c["client_id"],
            "share.acknowledgement.mode": "implicit",
            "max.poll.records": self.app.max_poll_records,
            "fetch.wait.max.ms": c["fetch_max_wait_ms"],
            "reconnect.backoff.max.ms": 500,
        }

    def run(self) -> int:
        import confluent_kafka

        signal.signal(signal.SIGTERM, self.stop)
        consumer = confluent_kafka.ShareConsumer(self.settings())
        consumer.set_acknowledgement_commit_callback(self.on_acknowledged)
        self.record("ready")
        go = Path(self.config["go_file"])
        while not go.exists() and not self.stopping:
            time.sleep(GO_POLL_S)
        try:
            if not self.stopping:
                consumer.subscribe(list(self.config["topics"]))
                self.record("subscribed")
                self.loop(consumer)
        finally:
            consumer.close()
            self.record("closed")
            self.out.close()
        return 0

    def loop(self, consumer: Any) -> None:
        import confluent_kafka

        held = False  # records of the last poll not yet acknowledged
        while not self.stopping:
            self.record("poll")
            try:
                messages = consumer.poll(POLL_S)
            except confluent_kafka.KafkaException as exc:
                self.record("error", detail=str(exc))
                if exc.args and exc.args[0].fatal():
                    return
                continue
            held = False
            records = [
                [m.topic(), m.partition(), m.offset(), m.delivery_count()] for m in messages if m.error() is None
            ]
            if not records:
                continue
            held = True
            self.record("records", records=records)
            done = time.monotonic() + self.app.records_ms(len(records), self.draws) / 1000
            while (left := done - time.monotonic()) > 0:  # (a SIGTERM lets the batch finish, as a close does)
                time.sleep(min(left, 0.05))
        if held:
            self.record("commit")
            consumer.commit_sync(10.0)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    return ShareMember(config).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

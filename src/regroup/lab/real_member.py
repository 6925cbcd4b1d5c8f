"""One real consumer process for ``regroup lab validate``: a confluent-kafka (librdkafka) consumer that
follows a scenario member's application model and writes what its rebalance callbacks did, with times.

Run as ``python -m regroup.lab.real_member CONFIG.json``; the orchestrator (``lab.real_run``) writes the
config. The process imports and builds its consumer first (and says ``ready``), then subscribes when the
orchestrator creates its ``go_file`` (at the scenario's join; for a bounce, once the process it replaces has
closed), so the start-up of Python and librdkafka does not delay the join.

The application loop is the model's (``client.app``): while the member owns partitions every poll stands for
a batch of ``max_poll_records`` records (the lab's backlog assumption), processed for the batch's drawn time
before the next poll (``poll(0)`` serves the callbacks that arrived meanwhile); while it owns nothing it waits
inside ``poll()``. No records cross the wire: the topics are empty, only the timing of polls matters to a
rebalance. Callbacks: ``on_revoke`` records the revocation when it starts (processing of those partitions
stops there), commits them synchronously when the model says so, works ``revoke_ms``, then unassigns;
``on_assign`` works ``assign_ms``, assigns, and records the assignment when it returns (processing starts
there); ``on_lost`` records and unassigns.

Output, JSON lines in ``out``: ``{"t": ms, "kind": "ready"|"subscribed"|"assigned"|"revoked"|"lost"|"closed"|
"error", "partitions": [[topic, p], ...], "detail": ...}`` (and ``"poll"`` before every poll when the environment
sets ``REGROUP_REAL_MEMBER_TRACE``). SIGTERM closes the consumer cleanly (revocation
callback and LeaveGroup, or the KIP-848 leave heartbeat) and exits; SIGKILL is a crash.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from regroup.client.app import AppModel

#: how long an idle application waits inside poll() at a time
IDLE_POLL_S = 0.05
#: processing sleeps in slices this long, so a SIGTERM closes the consumer at once
SLICE_S = 0.01
#: how often a ready process looks for its go file
GO_POLL_S = 0.002


class Member:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.app = AppModel(**{**config["app"], "processing": tuple(config["app"]["processing"])})
        self.draws = random.Random(config["seed"])
        self.owned: set[tuple[str, int]] = set()
        self.stopping = False
        self.out: IO[str] = Path(config["out"]).open("a", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed by run)
        self.cooperative = config["style"] != "eager"
        self.trace = bool(os.environ.get("REGROUP_REAL_MEMBER_TRACE"))  # also record every poll
        self.batch_end: float | None = None  # (monotonic) the end of the batch in hand
        self.called_back = False  # a callback ran since the last batch started
        self.callback_end: float | None = None  # (monotonic) when the last callback returned

    def record(self, kind: str, partitions: list[Any] | None = None, detail: str | None = None) -> None:
        pairs = sorted((tp.topic, tp.partition) for tp in partitions or [])
        line = {"t": time.time() * 1000, "kind": kind, "partitions": pairs, "detail": detail}
        self.out.write(json.dumps(line) + "\n")

    # --- callbacks (run inside poll() or close()) ------------------------------------------------------
    def on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.called_back = True
        if self.app.assign_ms:
            time.sleep(self.app.assign_ms / 1000)
        if self.cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        self.owned |= {(tp.topic, tp.partition) for tp in partitions}
        self.record("assigned", partitions)
        self.callback_end = time.monotonic()

    def on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        import confluent_kafka

        self.called_back = True
        self.record("revoked", partitions)
        self.owned -= {(tp.topic, tp.partition) for tp in partitions}
        if partitions and self.app.commit_on_revoke:
            offsets = [confluent_kafka.TopicPartition(tp.topic, tp.partition, 0) for tp in partitions]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except confluent_kafka.KafkaException as exc:
                self.record("error", None, f"commit on revoke failed: {exc}")
        if self.app.revoke_ms:
            time.sleep(self.app.revoke_ms / 1000)
        if self.cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()
        self.callback_end = time.monotonic()

    def on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self.called_back = True
        self.record("lost", partitions)
        self.owned -= {(tp.topic, tp.partition) for tp in partitions}
        if self.cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()
        self.callback_end = time.monotonic()

    # --- the application --------------------------------------------------------------------------------
    def consumer_config(self) -> dict[str, Any]:
        c = self.config
        settings: dict[str, Any] = {
            "bootstrap.servers": c["bootstrap"],
            "group.id": c["group"],
            "client.id": c["client_id"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": c["max_poll_interval_ms"],
            "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 5_000,
        }
        if c.get("group_instance_id"):
            settings["group.instance.id"] = c["group_instance_id"]
        if c["style"] == "consumer":
            settings["group.protocol"] = "consumer"
            if c.get("assignor"):
                settings["group.remote.assignor"] = c["assignor"]
        else:
            settings |= {
                "group.protocol": "classic",
                "partition.assignment.strategy": c["strategy"],
                "session.timeout.ms": c["session_timeout_ms"],
                "heartbeat.interval.ms": c["heartbeat_interval_ms"],
            }
        return settings

    def stop(self, *_: object) -> None:
        self.stopping = True

    def process(self, restart: bool) -> None:
        """One batch's processing time, in slices (a stop request ends it early). Batches run back to back
        on the model's grid: each ends its drawn time after the previous one's end (not after the poll that
        followed it, whose own time would otherwise add up), and a new run of batches starts now when the
        application was idle or ran callbacks in the poll just made (``restart``)."""
        now = time.monotonic()
        if restart or self.batch_end is None or now - self.batch_end > 1.0:
            # the batch started when the poll's callbacks returned: an idle poll goes on waiting after them
            # until its timeout, which the model's poll does not
            self.batch_end = self.callback_end if restart and self.callback_end is not None else now
        self.batch_end += self.app.batch_ms(self.draws) / 1000
        deadline = self.batch_end
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, SLICE_S))

    def run(self) -> int:
        import confluent_kafka

        signal.signal(signal.SIGTERM, self.stop)
        consumer = confluent_kafka.Consumer(self.consumer_config())
        self.record("ready")
        go = Path(self.config["go_file"])
        while not go.exists() and not self.stopping:
            time.sleep(GO_POLL_S)
        if self.stopping:
            consumer.close()
            self.record("closed")
            return 0
        consumer.subscribe(
            list(self.config["topics"]), on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
        )
        self.record("subscribed")
        try:
            while not self.stopping:
                idle = not self.owned
                if self.trace:
                    self.record("poll")
                message = consumer.poll(0 if self.owned else IDLE_POLL_S)
                error = message.error() if message is not None else None
                if error is not None and (error.fatal() or error.code() == confluent_kafka.KafkaError._FATAL):
                    self.record("error", None, f"fatal: {error}")
                    return 1
                if self.owned and not self.stopping:
                    self.process(restart=idle or self.called_back)
                    self.called_back = False
        finally:
            consumer.close()
            self.record("closed")
            self.out.close()
        return 0


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    return Member(config).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""A DeleteRecords of many partitions may walk them over several turns of the event loop, and waits for its writes
(``handlers/records.py``) while its connection's later requests wait for it, as Kafka handles a connection's
requests one at a time: a ListOffsets pipelined behind it on the same connection answers the new log starts,
never the old ones."""

from __future__ import annotations

from collections.abc import Callable

from tests.server.conftest import ServerProcess
from tests.server.test_produce_turns import send_produce
from tests.server.wire import WireClient, create_topics

DELETE_RECORDS, LIST_OFFSETS = 21, 2
EARLIEST = -2
HIGH_WATERMARK = -1
#: partitions whose log starts take long enough to write that a request pipelined behind would be handled
#: meanwhile, were it not held (their walk itself may fit in one slice)
PARTITIONS = 2_000

MakeServer = Callable[..., ServerProcess]


def test_a_list_offsets_pipelined_behind_a_delete_records_sees_its_log_starts(make_server: MakeServer) -> None:
    server = make_server()
    topic = "delete-records-turns"
    with WireClient(server.port, timeout=120) as client:
        create_topics(client, {topic: PARTITIONS})
        for value in (b"first", b"second"):
            send_produce(client, topic, value, PARTITIONS)
            produced = client.receive().responses[0].partition_responses
            assert all(p.error_code == 0 for p in produced)
        client.send(
            DELETE_RECORDS,
            2,
            topics=[
                {
                    "name": topic,
                    "partitions": [{"partition_index": p, "offset": HIGH_WATERMARK} for p in range(PARTITIONS)],
                }
            ],
            timeout=30_000,
        )
        client.send(
            LIST_OFFSETS,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": EARLIEST}
                        for p in range(PARTITIONS)
                    ],
                }
            ],
        )
        deleted, earliest = client.receive(), client.receive()
    lows = [(p.partition_index, p.error_code, p.low_watermark) for p in deleted.topics[0].partitions]
    assert lows == [(p, 0, 2) for p in range(PARTITIONS)]
    starts = [(p.partition_index, p.error_code, p.offset) for p in earliest.topics[0].partitions]
    assert starts == [(p, 0, 2) for p in range(PARTITIONS)]

"""Hand-built event logs with metrics worked out by hand (see the comments), shared by the lab tests."""

from __future__ import annotations

from regroup.sim.eventlog import EventLog


def eager_story() -> EventLog:
    """Two eager members a, b on topic t (2 partitions). Formation at 10 ms (ends when b applies its
    assignment at 30 ms); b leaves at 100 ms; the second rebalance starts at 105 and ends at 120."""
    log = EventLog()
    log.emit(0, "sim_start", value=0, detail="story")
    log.emit(0, "topic", topic="t", value=2)
    for m in ("a", "b"):
        log.emit(0, "action", member=m, detail="join")
        log.emit(0, "subscription", member=m, state="eager", value=1, detail="t")
        log.emit(0, "member_state", member=m, state="Unjoined", generation=-1)
        log.emit(0, "request_sent", member=m, api="JoinGroup", request_id=1, detail="protocols=range owned=[] reason=x")
    log.emit(10, "group_state", state="PreparingRebalance", generation=0)
    log.emit(10, "group_state", state="CompletingRebalance", generation=1, detail="protocol=range leader=a")
    for m in ("a", "b"):
        log.emit(10, "response_sent", member=m, api="JoinGroup", request_id=1, error="NONE", generation=1)
    log.emit(20, "group_state", state="Stable", generation=1, detail="protocol=range leader=a")
    log.emit(20, "group_assignment", member="a", generation=1, topic="t", partition=0)
    log.emit(20, "group_assignment", member="b", generation=1, topic="t", partition=1)
    log.emit(25, "callback", member="a", generation=1, state="assigned", value=1)
    log.emit(25, "assigned", member="a", generation=1, topic="t", partition=0)
    log.emit(30, "callback", member="b", generation=1, state="assigned", value=1)
    log.emit(30, "assigned", member="b", generation=1, topic="t", partition=1)
    # b leaves: revokes t-1, its process ends
    log.emit(100, "action", member="b", detail="leave")
    log.emit(100, "callback", member="b", generation=1, state="revoked", value=1)
    log.emit(100, "revoked", member="b", generation=1, topic="t", partition=1)
    log.emit(100, "member_state", member="b", state="Left", generation=1)
    log.emit(105, "group_state", state="PreparingRebalance", generation=1, detail="protocol=range leader=a")
    log.emit(105, "callback", member="a", generation=1, state="revoked", value=1)
    log.emit(105, "revoked", member="a", generation=1, topic="t", partition=0)
    log.emit(105, "request_sent", member="a", api="JoinGroup", request_id=5, detail="protocols=range owned=[] reason=y")
    log.emit(110, "group_state", state="CompletingRebalance", generation=2, detail="protocol=range leader=a")
    log.emit(110, "response_sent", member="a", api="JoinGroup", request_id=5, error="NONE", generation=2)
    log.emit(115, "group_state", state="Stable", generation=2, detail="protocol=range leader=a")
    log.emit(115, "group_assignment", member="a", generation=2, topic="t", partition=0)
    log.emit(115, "group_assignment", member="a", generation=2, topic="t", partition=1)
    log.emit(120, "callback", member="a", generation=2, state="assigned", value=2)
    log.emit(120, "assigned", member="a", generation=2, topic="t", partition=0)
    log.emit(120, "assigned", member="a", generation=2, topic="t", partition=1)
    log.emit(200, "sim_end", value=0)
    return log


def server_log() -> EventLog:
    """What ``regroup serve --events`` writes: two groups interleaved, no member processes."""
    log = EventLog()

    def joined(t: int, group: str, client: str, member_id: str, state: str) -> None:
        log.emit(
            t, "member_state", member=client, member_id=member_id, generation=0, state=state, detail=f"group={group}"
        )

    def group_state(t: int, group: str, state: str, generation: int) -> None:
        log.emit(t, "group_state", state=state, generation=generation, detail=f"group={group} protocol=range leader=x")

    joined(1000, "g1", "k1", "k1-1", "Joined")
    group_state(1000, "g1", "PreparingRebalance", 0)
    joined(1001, "g2", "z1", "z1-1", "Joined")
    group_state(1001, "g2", "PreparingRebalance", 0)
    group_state(1003, "g1", "CompletingRebalance", 1)
    group_state(1004, "g2", "CompletingRebalance", 1)
    group_state(1005, "g1", "Stable", 1)
    for p in range(3):
        log.emit(1005, "group_assignment", member="k1", member_id="k1-1", generation=1, topic="a", partition=p)
    group_state(1006, "g2", "Stable", 1)
    log.emit(1006, "group_assignment", member="z1", member_id="z1-1", generation=1, topic="b", partition=0)
    # g1 grows to two members: k2 takes a-2
    joined(2000, "g1", "k2", "k2-1", "Joined")
    group_state(2000, "g1", "PreparingRebalance", 1)
    group_state(2010, "g1", "CompletingRebalance", 2)
    group_state(2020, "g1", "Stable", 2)
    log.emit(2020, "group_assignment", member="k1", member_id="k1-1", generation=2, topic="a", partition=0)
    log.emit(2020, "group_assignment", member="k1", member_id="k1-1", generation=2, topic="a", partition=1)
    log.emit(2020, "group_assignment", member="k2", member_id="k2-1", generation=2, topic="a", partition=2)
    return log


def kip848_story() -> EventLog:
    """KIP-848 members a, b on topic t (2 partitions). a joins at 0 (epoch 1: both partitions); b joins at
    100 (epoch 2): a revokes t-1, then b gets it. Heartbeat payload bytes, worked out by hand:

    * epoch 1: a's join names its topic (2 bytes) and owns nothing (0); the answer carries t-0, t-1 (28); a
      acknowledges them (26): 56.
    * epoch 2: b's join (2 + 0); b's first answer, an empty assignment (2); a's answer without t-1 (24); a's
      acknowledgement of t-0 (22); b's answer with t-1 (24); b's acknowledgement (22): 96.
    """
    log = EventLog()
    hb = "ConsumerGroupHeartbeat"
    log.emit(0, "sim_start", value=0, detail="kip848-story")
    log.emit(0, "topic", topic="t", value=2)
    log.emit(0, "action", member="a", detail="join")
    log.emit(0, "subscription", member="a", state="consumer", value=1, detail="t")
    log.emit(0, "request_sent", member="a", api=hb, generation=0, detail="epoch=0 full topics=t owned=[]")
    log.emit(2, "group_state", state="Reconciling", generation=1, detail="assignor=uniform")
    log.emit(2, "response_sent", member="a", api=hb, error="NONE", generation=1, detail="assignment=[t-0,t-1]")
    log.emit(2, "group_state", state="Stable", generation=1, detail="assignor=uniform")
    log.emit(4, "callback", member="a", generation=1, state="assigned", value=2)
    log.emit(4, "assigned", member="a", generation=1, topic="t", partition=0)
    log.emit(4, "assigned", member="a", generation=1, topic="t", partition=1)
    log.emit(6, "request_sent", member="a", api=hb, generation=1, detail="epoch=1 owned=[t-0,t-1]")
    log.emit(7, "response_sent", member="a", api=hb, error="NONE", generation=1)
    # b joins
    log.emit(100, "action", member="b", detail="join")
    log.emit(100, "subscription", member="b", state="consumer", value=1, detail="t")
    log.emit(100, "request_sent", member="b", api=hb, generation=0, detail="epoch=0 full topics=t owned=[]")
    log.emit(102, "group_state", state="Reconciling", generation=2, detail="assignor=uniform")
    log.emit(102, "response_sent", member="b", api=hb, error="NONE", generation=2, detail="assignment=[]")
    log.emit(103, "request_sent", member="a", api=hb, generation=1, detail="epoch=1")
    log.emit(103, "response_sent", member="a", api=hb, error="NONE", generation=1, detail="assignment=[t-0]")
    log.emit(104, "callback", member="a", generation=1, state="revoked", value=1)
    log.emit(104, "revoked", member="a", generation=1, topic="t", partition=1)
    log.emit(105, "request_sent", member="a", api=hb, generation=1, detail="epoch=1 owned=[t-0]")
    log.emit(105, "response_sent", member="a", api=hb, error="NONE", generation=2)
    log.emit(107, "request_sent", member="b", api=hb, generation=2, detail="epoch=2")
    log.emit(107, "response_sent", member="b", api=hb, error="NONE", generation=2, detail="assignment=[t-1]")
    log.emit(108, "group_state", state="Stable", generation=2, detail="assignor=uniform")
    log.emit(110, "callback", member="b", generation=2, state="assigned", value=1)
    log.emit(110, "assigned", member="b", generation=2, topic="t", partition=1)
    log.emit(112, "request_sent", member="b", api=hb, generation=2, detail="epoch=2 owned=[t-1]")
    log.emit(113, "response_sent", member="b", api=hb, error="NONE", generation=2)
    log.emit(200, "sim_end", value=0)
    return log


def quiet_story() -> EventLog:
    """One eager member subscribes to topic t and the log ends before the group forms: a run without a
    single rebalance."""
    log = EventLog()
    log.emit(0, "sim_start", value=0, detail="quiet")
    log.emit(0, "topic", topic="t", value=2)
    log.emit(0, "action", member="a", detail="join")
    log.emit(0, "subscription", member="a", state="eager", value=1, detail="t")
    log.emit(0, "member_state", member="a", state="Unjoined", generation=-1)
    log.emit(50, "sim_end", value=0)
    return log

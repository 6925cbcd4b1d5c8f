"""One share partition over random operation sequences by three members: the log growing, acquisitions,
acknowledgements (well-formed ones over what a member holds, and arbitrary ones that are mostly refused),
members leaving, time passing and locks expiring, and restarts from the persisted state. A reference model
follows what each call returned, and after every step:

* an offset is held by at most one member, and acquiring takes exactly the lowest offsets nobody holds and
  nobody finished, within the log end and the in-flight limit;
* an acknowledged or archived offset stays so (acknowledging it again is refused) and is never acquired again;
  an offset acquired as often as the delivery limit allows is archived when released, never acquired again;
* a refused acknowledgement changes nothing;
* the SPSO never moves down, every offset below it is done, and the window stays within the in-flight limit;
* rebuilding from the persisted state batches gives the partition with every lock released;

and at the end, once every member accepts everything it gets, every offset below the log end is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    ShareError,
    SharePartition,
)

MEMBERS = ("a", "b", "c")
LOCK = 1_000
ACK_TYPES = (GAP, ACCEPT, ACCEPT, RELEASE, RELEASE, REJECT, RENEW)
OPS = ("produce", "acquire", "acquire", "acquire", "ack", "ack", "ack", "any_ack", "leave", "tick", "restart")


@dataclass
class Model:
    """What the partition should hold, from the results of the calls made on it."""

    delivery_limit: int
    holder: dict[int, tuple[str, int]] = field(default_factory=dict)  # offset -> (member, deadline)
    deliveries: dict[int, int] = field(default_factory=dict)
    finished: dict[int, int] = field(default_factory=dict)  # offset -> ACKNOWLEDGED or ARCHIVED

    def release(self, offset: int) -> None:
        del self.holder[offset]
        if self.deliveries[offset] >= self.delivery_limit:
            self.finished[offset] = ARCHIVED

    def held(self, member: str) -> list[int]:
        return sorted(o for o, (m, _) in self.holder.items() if m == member)

    def expected(self, offset: int, released: bool) -> tuple[int, int, str | None, int | None]:
        count = self.deliveries.get(offset, 0)
        if offset in self.holder:
            if released:
                return (ARCHIVED if count >= self.delivery_limit else AVAILABLE, count, None, None)
            member, deadline = self.holder[offset]
            return (ACQUIRED, count, member, deadline)
        return (self.finished.get(offset, AVAILABLE), count, None, None)


def apply_ack(model: Model, member: str, batches: list[AckBatch], now: int) -> None:
    for batch in batches:
        for k, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
            ack_type = batch.types[0] if len(batch.types) == 1 else batch.types[k]
            if ack_type == ACCEPT:
                del model.holder[offset]
                model.finished[offset] = ACKNOWLEDGED
            elif ack_type in (GAP, REJECT):
                del model.holder[offset]
                model.finished[offset] = ARCHIVED
            elif ack_type == RELEASE:
                model.release(offset)
            else:
                model.holder[offset] = (member, now + LOCK)


def acceptable(model: Model, member: str, batches: list[AckBatch]) -> bool:
    """Whether the model expects ``batches`` to be applied: well-formed and all held by ``member``."""
    previous = -1
    for batch in batches:
        if batch.first_offset <= previous or batch.first_offset > batch.last_offset:
            return False
        if len(batch.types) not in (1, batch.last_offset - batch.first_offset + 1):
            return False
        for offset in range(batch.first_offset, batch.last_offset + 1):
            if model.holder.get(offset, ("", 0))[0] != member:
                return False
        previous = batch.last_offset
    return True


def draw_types(data: st.DataObject, size: int) -> tuple[int, ...]:
    if data.draw(st.booleans()):
        return (data.draw(st.sampled_from(ACK_TYPES)),)
    return tuple(data.draw(st.lists(st.sampled_from(ACK_TYPES), min_size=size, max_size=size)))


def draw_held_ack(data: st.DataObject, model: Model, member: str) -> list[AckBatch]:
    """Well-formed batches over sub-ranges of the runs of consecutive offsets ``member`` holds."""
    runs: list[list[int]] = []
    for offset in model.held(member):
        if runs and runs[-1][-1] + 1 == offset:
            runs[-1].append(offset)
        else:
            runs.append([offset])
    batches = []
    for run in runs:
        if not data.draw(st.booleans()):
            continue
        lo = data.draw(st.integers(0, len(run) - 1))
        hi = data.draw(st.integers(lo, len(run) - 1))
        batches.append(AckBatch(run[lo], run[hi], draw_types(data, hi - lo + 1)))
    return batches


def draw_any_ack(data: st.DataObject, p: SharePartition, log_end: int) -> list[AckBatch]:
    """Arbitrary batches around the window: mostly refused."""
    batches = []
    for _ in range(data.draw(st.integers(1, 2))):
        first = data.draw(st.integers(max(p.start_offset - 2, 0), log_end + 1))
        last = first + data.draw(st.integers(-1, 3))
        types = draw_types(data, max(last - first + 1, 1))
        if data.draw(st.integers(0, 9)) == 0:
            types = (*types, ACCEPT)
        batches.append(AckBatch(first, last, types))
    return batches


def check(p: SharePartition, model: Model, start0: int, log_end: int, now: int) -> None:
    start, end = p.start_offset, p.end_offset
    assert start0 <= start <= end <= log_end
    assert end - start <= p.max_in_flight
    assert all(o in model.finished for o in range(start0, start)), "an offset below the SPSO is not done"
    assert all(start <= o < end for o in model.holder)
    actual = {r.offset: (r.state, r.delivery_count, r.member_id, r.deadline_ms) for r in p.in_flight()}
    assert actual == {o: model.expected(o, released=False) for o in range(start, end)}
    assert all(count <= model.delivery_limit for count in model.deliveries.values())
    assert p.acquired_count() == len(model.holder)
    assert sum(p.held_by(m) for m in MEMBERS) == len(model.holder)
    assert p.next_deadline() == min((d for _, d in model.holder.values()), default=None)
    assert p.lag(log_end) == sum(1 for o in range(start, log_end) if o not in model.finished)

    rebuilt = SharePartition.from_state(
        start, p.state_batches(), delivery_limit=p.delivery_limit, max_in_flight=p.max_in_flight
    )
    assert rebuilt.snapshot() == p.without_locks().snapshot()
    released = {o: model.expected(o, released=True) for o in range(start, end)}
    first_open = next((o for o in range(start, end) if released[o][0] not in (ACKNOWLEDGED, ARCHIVED)), end)
    assert rebuilt.start_offset == first_open
    assert rebuilt.end_offset == (end if first_open < end else first_open)
    assert {r.offset: (r.state, r.delivery_count, r.member_id, r.deadline_ms) for r in rebuilt.in_flight()} == {
        o: released[o] for o in range(first_open, end)
    }


@settings(max_examples=250, deadline=None)
@given(
    data=st.data(),
    start0=st.integers(0, 5),
    delivery_limit=st.integers(1, 4),
    max_in_flight=st.integers(1, 12),
)
def test_random_operations_keep_a_share_partition_consistent(
    data: st.DataObject, start0: int, delivery_limit: int, max_in_flight: int
) -> None:
    p = SharePartition(start0, delivery_limit=delivery_limit, max_in_flight=max_in_flight)
    model = Model(delivery_limit)
    log_end = start0 + data.draw(st.integers(0, 10))
    now = 0
    for _ in range(data.draw(st.integers(1, 40))):
        op = data.draw(st.sampled_from(OPS))
        member = data.draw(st.sampled_from(MEMBERS))
        spso = p.start_offset
        if op == "produce":
            log_end += data.draw(st.integers(1, 5))
        elif op == "acquire":
            max_records = data.draw(st.integers(1, 6))
            candidates = [
                o
                for o in range(spso, min(log_end, spso + max_in_flight))
                if o not in model.holder and o not in model.finished
            ]
            runs = p.acquire(member, log_end, max_records, now, LOCK)
            taken = [o for run in runs for o in range(run.first_offset, run.last_offset + 1)]
            assert taken == candidates[:max_records]
            for run in runs:
                for offset in range(run.first_offset, run.last_offset + 1):
                    model.deliveries[offset] = model.deliveries.get(offset, 0) + 1
                    assert model.deliveries[offset] == run.delivery_count
                    model.holder[offset] = (member, now + LOCK)
            for left, right in pairwise(runs):  # maximal runs
                assert left.last_offset + 1 < right.first_offset or left.delivery_count != right.delivery_count
        elif op in ("ack", "any_ack"):
            batches = draw_held_ack(data, model, member) if op == "ack" else draw_any_ack(data, p, log_end)
            expected = acceptable(model, member, batches)
            before = p.snapshot()
            result = p.acknowledge(member, batches, now, LOCK)
            assert (result == ShareError.NONE) == expected, (batches, result)
            if expected:
                apply_ack(model, member, batches, now)
            else:
                assert p.snapshot() == before
        elif op == "leave":
            held = model.held(member)
            assert p.release_member(member) == bool(held)
            for offset in held:
                model.release(offset)
        elif op == "tick":
            now += data.draw(st.sampled_from((0, LOCK // 2, LOCK)) | st.integers(0, LOCK + LOCK // 2))
            due = sorted(o for o, (_, deadline) in model.holder.items() if deadline <= now)
            assert p.expire(now) == bool(due)
            for offset in due:
                model.release(offset)
        else:  # restart: locks are lost, the persisted state comes back
            p = SharePartition.from_state(
                p.start_offset, p.state_batches(), delivery_limit=delivery_limit, max_in_flight=max_in_flight
            )
            for offset in list(model.holder):
                model.release(offset)
        assert p.start_offset >= spso, "the SPSO moved down"
        check(p, model, start0, log_end, now)

    # everyone accepts whatever it gets from now on: everything below the log end ends done
    now += 2 * LOCK
    p.expire(now)
    for offset in [o for o, (_, deadline) in model.holder.items() if deadline <= now]:
        model.release(offset)
    for round_ in range(2 * (log_end - start0) + 2):
        if p.start_offset == log_end:
            break
        member = MEMBERS[round_ % len(MEMBERS)]
        runs = p.acquire(member, log_end, data.draw(st.integers(1, 6)), now, LOCK)
        assert runs, "nothing to acquire while offsets below the log end are not done"
        batches = [AckBatch(r.first_offset, r.last_offset, (ACCEPT,)) for r in runs]
        assert p.acknowledge(member, batches, now, LOCK) == ShareError.NONE
    assert (p.start_offset, p.end_offset, p.lag(log_end)) == (log_end, log_end, 0)

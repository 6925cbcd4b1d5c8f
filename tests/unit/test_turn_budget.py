"""The server's connections share one budget of request handling per turn of the event loop
(``network/turn_budget.py``): once the requests of some connections have spent it, another connection with data
in the same turn handles one request and leaves the rest for a later turn; what connections leave waits in one
queue, taken in order a budget's worth per turn; everything is still handled, each connection's requests in
order.

The clock the connections and the budget read is a test clock here, moved on only by the responder's work: how
many requests fit in a budget does not depend on how busy the machine running the tests is."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from regroup.network.codec import DecodedRequest, prepare_version
from regroup.network.connection import Connection
from regroup.network.turn_budget import TurnBudget
from tests.server.wire import LEAVE, encode_request

API_VERSIONS = 18
#: what handling one request costs here (the responder sleeps), and the shared budget of a turn
REQUEST_S = 0.002
BUDGET_S = 0.005
#: the requests a connection handles in 5 ms: the one that crosses the bound is the last
REQUESTS_PER_BUDGET = 3


class SteppedClock:
    """``time.perf_counter`` for these tests: it stands still but for what ``spend`` adds."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds

    def spend(self, seconds: float) -> None:
        self.seconds += seconds


@pytest.fixture(autouse=True)
def prepared() -> None:
    """ApiVersions v0 prepared already, as after a server's first such request: its first is otherwise handled
    only once the decoding thread has prepared it (``codec.prepare_version``), which these tests do not follow."""
    prepare_version(API_VERSIONS, 0)


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[SteppedClock]:
    test_clock = SteppedClock()
    monkeypatch.setattr(time, "perf_counter", test_clock)
    yield test_clock


class SlowResponder:
    """Answers each request synchronously, its handling taking ``REQUEST_S`` of the test clock, noting which
    connection asked, in order."""

    def __init__(self) -> None:
        self.versions = {API_VERSIONS: (0, 3)}
        self.limits: dict[int, Any] = {}
        self.handled: list[tuple[int, int]] = []  # (connection id, correlation id)

    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Any = None
    ) -> bytes | None:
        time.perf_counter.spend(REQUEST_S)  # type: ignore[attr-defined]
        self.handled.append((connection_id, request.correlation_id))
        return b"\x00\x00\x00\x04" + request.correlation_id.to_bytes(4, "big")


def transport() -> Any:
    """The little of ``asyncio.Transport`` a connection uses; what it writes, dropped."""

    def nothing(*_: Any, **__: Any) -> None:
        return None

    peer = ("127.0.0.1", 9999)
    return SimpleNamespace(
        get_extra_info=lambda name, default=None: peer if name == "peername" else default,
        get_write_buffer_size=lambda: 0,
        is_closing=lambda: False,
        **dict.fromkeys(("set_write_buffer_limits", "write", "writelines", "pause_reading", "resume_reading"), nothing),
        close=nothing,
    )


def frames(count: int) -> bytes:
    return b"".join(encode_request(API_VERSIONS, 0, i, "c") for i in range(count))


def test_a_connection_with_data_after_the_turn_budget_is_spent_handles_one_request_then_waits_a_turn() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        responder = SlowResponder()
        budget = TurnBudget(loop, BUDGET_S)
        busy, late = Connection(responder, 1, turn_budget=budget), Connection(responder, 2, turn_budget=budget)
        for connection in (busy, late):
            connection.connection_made(transport())
        busy.data_received(frames(20))
        spent = len(responder.handled)
        assert spent == REQUESTS_PER_BUDGET  # the busy connection stopped where the budget ended
        late.data_received(frames(20))  # in the same turn: the budget is spent
        assert responder.handled[spent:] == [(2, 0)]  # one request, the rest waits
        for _ in range(200):
            if len(responder.handled) == 40:
                break
            before = len(responder.handled)
            await asyncio.sleep(0)
            # a later turn: the waiting connections' queue, a budget's worth (one request at least)
            assert 1 <= len(responder.handled) - before <= BUDGET_S / REQUEST_S + 1
        # in turn, request by request, while both wait
        first_turn = spent + 1
        both = responder.handled[first_turn : next(i for i, (_, c) in enumerate(responder.handled) if c == 19)]
        runs = [len(list(run)) for _, run in itertools.groupby(who for who, _ in both)]
        assert runs and max(runs) == 1
        for connection_id in (1, 2):
            assert [c for who, c in responder.handled if who == connection_id] == list(range(20))
        busy.close()
        late.close()

    asyncio.run(scenario())


def test_without_a_shared_budget_each_connection_keeps_its_own() -> None:
    async def scenario() -> None:
        responder = SlowResponder()
        first, second = Connection(responder, 1), Connection(responder, 2)
        for connection in (first, second):
            connection.connection_made(transport())
        first.data_received(frames(20))
        spent = len(responder.handled)
        second.data_received(frames(20))
        assert spent == REQUESTS_PER_BUDGET
        assert len(responder.handled) - spent == REQUESTS_PER_BUDGET  # its own 5 ms, not what the first one left
        first.close()
        second.close()

    asyncio.run(scenario())


def test_a_connection_new_to_the_wait_goes_before_the_backlogs_of_those_back_again() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        responder = SlowResponder()
        budget = TurnBudget(loop, BUDGET_S)
        connections = [Connection(responder, i, turn_budget=budget) for i in (1, 2, 3)]
        for connection in connections:
            connection.connection_made(transport())
        connections[0].data_received(frames(30))
        connections[1].data_received(frames(30))
        for _ in range(3):  # both busy connections have had turns from the queue: back again, in its second line
            await asyncio.sleep(0)
        connections[2].data_received(frames(2))  # its first request now, the second waits
        handled = len(responder.handled)
        assert responder.handled[-1] == (3, 0)
        await asyncio.sleep(0)
        assert responder.handled[handled] == (3, 1)  # first in the next turn, before the busy backlogs
        for connection in connections:
            connection.close()

    asyncio.run(scenario())


def leaves(count: int) -> bytes:
    """``count`` LeaveGroup v0 requests: a classic rebalance's (``REBALANCE_APIS``)."""
    return b"".join(encode_request(LEAVE, 0, i, "c", group_id="g", member_id=f"m{i}") for i in range(count))


def test_a_connection_whose_next_request_is_a_rebalances_waits_behind_the_others() -> None:
    """Two connections sending a burst of a rebalance's requests and a steady one with two requests, in the same
    turn: the second rebalancing connection, with data once the budget is spent, handles none of it in that
    turn (the steady one handles one); the steady one's second request goes first in the next turn, though
    the rebalancing connections were waiting before it, and every request is still handled, in order."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        responder = SlowResponder()
        responder.versions[LEAVE] = (0, 0)
        budget = TurnBudget(loop, BUDGET_S)
        rebalancing = [Connection(responder, i, turn_budget=budget) for i in (1, 2)]
        steady = Connection(responder, 3, turn_budget=budget)
        for connection in (*rebalancing, steady):
            connection.connection_made(transport())
        rebalancing[0].data_received(leaves(20))
        rebalancing[1].data_received(leaves(20))  # the budget is spent: none handled, all of it waits
        assert not [c for who, c in responder.handled if who == 2]
        steady.data_received(frames(2))
        handled = len(responder.handled)
        assert responder.handled[-1] == (3, 0)
        await asyncio.sleep(0)
        assert responder.handled[handled] == (3, 1)  # first in the next turn, before the rebalances' requests
        for _ in range(200):
            if len(responder.handled) == 42:
                break
            await asyncio.sleep(0)
        for connection_id, count in ((1, 20), (2, 20), (3, 2)):
            assert [c for who, c in responder.handled if who == connection_id] == list(range(count))
        for connection in (*rebalancing, steady):
            connection.close()

    asyncio.run(scenario())


def test_a_turn_that_raises_does_not_keep_the_others_waiting() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: None)  # (the raising turn's error, reported by the loop)
        budget = TurnBudget(loop, BUDGET_S)
        ran: list[str] = []

        def fails() -> None:
            ran.append("fails")
            raise RuntimeError("a turn that fails")

        budget.later(fails)
        budget.later(lambda: ran.append("next"))
        for _ in range(5):
            await asyncio.sleep(0)
        return ran

    assert asyncio.run(scenario()) == ["fails", "next"]


def test_the_second_line_gets_a_turn_in_every_turn_however_long_the_first() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        budget = TurnBudget(loop, 0.0)  # (spent by the first turn taken)
        ran: list[str] = []

        def first(name: str) -> None:
            budget.ends(time.perf_counter())  # (as a connection's handling opens the turn's budget)
            ran.append(name)

        for i in range(3):
            budget.later(functools.partial(first, f"new{i}"))
        budget.later(functools.partial(first, "again"), again=True)
        await asyncio.sleep(0)
        return ran

    assert asyncio.run(scenario())[:2] == ["new0", "again"]  # (the rest of the first line in later turns)


def test_the_queues_turn_shares_the_budget_the_reads_of_the_same_turn_opened(clock: SteppedClock) -> None:
    """The queue's turn does not open a budget of its own: once the reads of a turn have spent it, the queue
    serves one connection (its least) and the rest waits for the next turn's fresh budget, so the handling
    between two reads of the sockets is about one budget, not one for the reads and another for the queue."""

    async def scenario() -> list[list[str]]:
        loop = asyncio.get_running_loop()
        budget = TurnBudget(loop, BUDGET_S)
        ran: list[str] = []

        def queued(name: str) -> None:
            budget.ends(time.perf_counter())
            clock.spend(REQUEST_S)
            ran.append(name)

        for i in range(6):
            budget.later(functools.partial(queued, f"q{i}"))
        budget.ends(time.perf_counter())  # a connection's reads open this turn's budget and spend all of it
        clock.spend(BUDGET_S)
        turns: list[list[str]] = []
        for _ in range(3):
            await asyncio.sleep(0)
            turns.append(list(ran))
            ran.clear()
        return turns

    # spent: one from the queue; then a fresh budget each turn, three requests of 2 ms in 5 ms
    assert asyncio.run(scenario()) == [["q0"], ["q1", "q2", "q3"], ["q4", "q5"]]

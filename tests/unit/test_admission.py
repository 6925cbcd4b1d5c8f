"""``network/admission.py`` on its own: the connection counts against the limits under any sequence of opens
and closes, the open-file cap, and the log's rate limit (one line per key per interval, the rest counted)."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.network.admission import AcceptErrors, Admission, RateLimit

HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@given(
    max_total=st.integers(1, 8),
    max_per_ip=st.integers(1, 8),
    ops=st.lists(st.tuples(st.booleans(), st.sampled_from(HOSTS)), max_size=60),
)
def test_admission_counts_match_a_model_under_any_opens_and_closes(
    max_total: int, max_per_ip: int, ops: list[tuple[bool, str]]
) -> None:
    admission = Admission(max_total, max_per_ip, open_files=1_000_000)
    model: dict[str, int] = {}
    refused = 0
    for is_open, host in ops:
        if is_open:
            expected = sum(model.values()) < max_total and model.get(host, 0) < max_per_ip
            assert admission.admit(host) is expected
            if expected:
                model[host] = model.get(host, 0) + 1
            else:
                refused += 1
        elif model.get(host):
            admission.release(host)
            model[host] -= 1
        assert admission.open == sum(model.values()) <= max_total
        assert dict(admission.per_ip) == {h: n for h, n in model.items() if n}
    assert sum(admission.refused.values()) == refused


def test_the_open_file_limit_caps_connections_after_its_reserve_and_the_partitions() -> None:
    admission = Admission(10_000, 10_000, open_files=1024)  # reserve 256: room for 768
    assert admission.fd_room == 768
    assert all(admission.admit(f"h{i}") for i in range(700))
    admission.log_files = 68  # partitions created since: 700 connections fill what is left
    assert not admission.admit("late")
    assert admission.refused == {"open_files": 1}
    admission.release("h0")
    assert admission.admit("late")
    small = Admission(10_000, 10_000, open_files=128)  # a small limit keeps a quarter
    assert small.fd_room == 96


def test_rate_limit_logs_once_per_key_per_interval_and_counts_the_rest() -> None:
    clock = Clock()
    limit = RateLimit(60.0, clock)
    assert limit.check("a") == 0
    assert [limit.check("a") for _ in range(5)] == [None] * 5
    assert limit.check("b") == 0  # keys are independent
    clock.now = 59.9
    assert limit.check("a") is None
    clock.now = 60.0
    assert limit.check("a") == 6  # the line after the interval says how many were left out
    assert limit.check("a") is None


def test_refusals_log_one_line_per_address_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    admission = Admission(1, 1, open_files=1_000_000, clock=clock)
    assert admission.admit("10.0.0.1")
    with caplog.at_level(logging.INFO, logger="regroup.network.admission"):
        for _ in range(100):
            assert not admission.admit("10.0.0.1")
            assert not admission.admit("10.0.0.2")
        clock.now = 61.0
        assert not admission.admit("10.0.0.1")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("refusing connection from 10.0.0.1: 1 open (--max-connections)")
    assert lines[2].endswith("(99 more refused since the last line)")


def test_accept_errors_are_rate_limited_and_everything_else_passes_through(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    passed: list[dict[str, Any]] = []
    handler = AcceptErrors(lambda loop, context: passed.append(context), clock=clock)
    loop = asyncio.new_event_loop()
    try:
        emfile = OSError(errno.EMFILE, "Too many open files")
        with caplog.at_level(logging.WARNING, logger="regroup.network.admission"):
            for _ in range(30):  # asyncio retries once a second
                handler(loop, {"message": "socket.accept() out of system resource", "exception": emfile})
                clock.now += 1
            handler(loop, {"message": "something else"})
    finally:
        loop.close()
    assert handler.failures == 30
    assert [r.getMessage() for r in caplog.records] == [
        "cannot accept connections: Too many open files; retrying every second until descriptors free up"
    ]
    assert passed == [{"message": "something else"}]

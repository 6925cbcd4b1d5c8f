"""The dispatcher turns whatever a handler does wrong into the API's error response — UNKNOWN_SERVER_ERROR in every
error slot, logged once per API and exception type and counted after that — and closes the connection only when
no error response can be built."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from regroup.model.errors import ApiError, ErrorCode
from regroup.network.codec import decode_request
from regroup.server.api import ApiSpec, RequestContext
from regroup.server.dispatch import Dispatcher, HandlerFailed
from regroup.server.handlers import admin
from tests.server.wire import DESCRIBE, encode_request

DESCRIBE_SPEC = next(spec for spec in admin.SPECS if spec.api_key == DESCRIBE)


def dispatcher_with(handler: Any, error_response: Any = DESCRIBE_SPEC.error_response) -> Dispatcher:
    spec = ApiSpec(DESCRIBE, 0, 5, handler, error_response)
    return Dispatcher(broker=None, specs={DESCRIBE: spec})  # type: ignore[arg-type]


def describe(dispatcher: Dispatcher, groups: list[str], *, planned: bool = False) -> Any:
    """DescribeGroups of ``groups`` through the dispatcher (``planned``: planned first, as the decoding thread
    plans a large request)."""
    frame = encode_request(DESCRIBE, 5, 7, "c", groups=groups, include_authorized_operations=False)
    request = decode_request(frame[4:], dispatcher.versions)
    if planned:
        dispatcher.plan_aside(request)
    data = asyncio.run(dispatcher.respond(request, client_host="127.0.0.1", connection_id=1))
    assert data is not None
    cls = load_response_schema(DESCRIBE, 5)
    _, used = entity_reader(cls.__header_schema__)(data, 4)
    body, _ = entity_reader(cls)(data, 4 + used)
    return body


async def broken(broker: Any, ctx: RequestContext, request: Any) -> Any:
    raise KeyError("a bug")


def test_a_raising_handler_answers_unknown_server_error_in_every_slot(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = dispatcher_with(broken)
    with caplog.at_level(logging.INFO, logger="regroup.server"):
        for _ in range(3):
            body = describe(dispatcher, ["a", "b"])
            assert [(g.group_id, g.error_code) for g in body.groups] == [("a", -1), ("b", -1)]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "KeyError" in errors[0].getMessage() and errors[0].exc_info is None
    assert dispatcher.failures.counts[("DescribeGroups", "KeyError")] == 3


def test_api_errors_carry_their_code() -> None:
    async def refusing(broker: Any, ctx: RequestContext, request: Any) -> Any:
        raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)

    body = describe(dispatcher_with(refusing), ["a"])
    assert [g.error_code for g in body.groups] == [ErrorCode.GROUP_AUTHORIZATION_FAILED]


def test_a_handler_returning_the_wrong_entity_is_a_failure_too() -> None:
    async def wrong(broker: Any, ctx: RequestContext, request: Any) -> Any:
        return "not a response"

    dispatcher = dispatcher_with(wrong)
    assert [g.error_code for g in describe(dispatcher, ["a"]).groups] == [-1]
    assert dispatcher.failures.counts[("DescribeGroups", "HandlerContractError")] == 1


@pytest.mark.parametrize("error_response", [None, lambda ctx, request, code: 1 / 0])
def test_without_an_error_response_the_connection_is_closed(error_response: Any) -> None:
    with pytest.raises(HandlerFailed):
        describe(dispatcher_with(broken, error_response), ["a"])


def plan_seen_by(plan_aside: Any) -> tuple[Dispatcher, list[Any]]:
    """A dispatcher whose DescribeGroups handler records the plan it is given and refuses with an API error."""
    seen: list[Any] = []

    async def handler(broker: Any, ctx: RequestContext, request: Any) -> Any:
        seen.append(ctx.plan)
        raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)

    spec = ApiSpec(DESCRIBE, 0, 5, handler, DESCRIBE_SPEC.error_response, plan_aside=plan_aside)
    return Dispatcher(broker=None, specs={DESCRIBE: spec}), seen  # type: ignore[arg-type]


def test_the_plan_made_aside_reaches_the_handler() -> None:
    dispatcher, seen = plan_seen_by(lambda broker, version, body: (version, tuple(body.groups)))
    assert [g.error_code for g in describe(dispatcher, ["a", "b"], planned=True).groups] == [30, 30]
    assert seen == [(5, ("a", "b"))]
    describe(dispatcher, ["c"])  # not planned (a small frame): no plan
    assert seen[1] is None


def test_a_failing_plan_is_logged_once_and_the_handler_answers_without_it(caplog: pytest.LogCaptureFixture) -> None:
    def failing(broker: Any, version: int, body: Any) -> Any:
        raise ValueError("a bug in the plan")

    dispatcher, seen = plan_seen_by(failing)
    with caplog.at_level(logging.INFO, logger="regroup.server"):
        for _ in range(3):
            assert [g.error_code for g in describe(dispatcher, ["a"], planned=True).groups] == [30]
    assert seen == [None, None, None]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "ValueError: a bug in the plan" in errors[0].getMessage()
    assert dispatcher.failures.counts[("DescribeGroups", "plan_failed")] == 3

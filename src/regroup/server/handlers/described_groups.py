"""The answer ConsumerGroupDescribe and ShareGroupDescribe share once the core has described their groups: the
groups refused before asking it first, then each described group with its authorized operations when the request
asks for them, every group's bytes written a chunk at a time by the group type's own encoder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from regroup.model.errors import ErrorCode
from regroup.security.acl import ResourceType
from regroup.server.api import Broker, RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import GROUP_OPERATIONS, authorized_operations
from regroup.server.handlers.authorized import NOT_REQUESTED as OPERATIONS_NOT_REQUESTED
from regroup.server.inspection_answers import element_class, encode_items, read_pacer, spliced
from regroup.server.offset_answers import Pacer, pause


class DescribedHeader(Protocol):
    """What the answer reads of a described group's header."""

    @property
    def group_id(self) -> str: ...

    @property
    def error(self) -> ErrorCode: ...


Header = TypeVar("Header", bound=DescribedHeader)
Row = TypeVar("Row")

#: a described group's own entity (its members apart) costs about forty listed groups to build and encode: 25
#: groups between two yields (a ConsumerGroupDescribe of 1,000 groups was 20-25 ms in one step)
GROUP_WEIGHT = 40

#: one described group's bytes: (the answer's group class, header, member rows, authorized operations, pacer)
GroupBytes = Callable[[type[Any], Header, Sequence[Row], int, Pacer], Awaitable[bytes]]


async def described_groups_answer(
    broker: Broker,
    ctx: RequestContext,
    request: Any,
    refused: list[dict[str, Any]],
    rows: Sequence[tuple[Header, Sequence[Row]]],
    group_bytes: GroupBytes[Header, Row],
) -> PreEncoded:
    """The whole answer: ``refused`` groups (already built), then ``rows`` as ``group_bytes`` encodes them."""
    wanted = request.include_authorized_operations
    empty = respond(ctx, groups=[])
    group_class = element_class(type(empty), "groups")
    pacer = read_pacer(sum(len(members) for _, members in rows))
    parts = await encode_items(group_class, refused, pacer, dict, GROUP_WEIGHT)
    for header, members in rows:
        if pacer.due(GROUP_WEIGHT):
            await pause()
        operations = (
            authorized_operations(broker, ctx, ResourceType.GROUP, header.group_id, GROUP_OPERATIONS)
            if wanted and header.error is ErrorCode.NONE
            else OPERATIONS_NOT_REQUESTED
        )
        parts.append(await group_bytes(group_class, header, members, operations, pacer))
    body = await spliced(empty, "groups", parts, pacer)
    codes = [int(g["error_code"]) for g in refused] + [int(header.error) for header, _ in rows]
    return PreEncoded(type(empty), body, tuple(code for code in codes if code))

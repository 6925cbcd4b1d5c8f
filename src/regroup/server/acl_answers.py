"""The bodies of DescribeAcls and DeleteAcls answers, encoded by hand, a chunk of ACLs at a time with the event
loop given back between chunks.

``kafka-acls --list`` on a broker of 10,000 ACLs asks for all of them: a kio entity per ACL and per resource,
then kio's encoding, held the loop about 120 ms. Here an ACL is its principal's and host's bytes (kept per
answer: a few principals and hosts recur over thousands of ACLs) and one ``struct`` pack.

Layout (Kafka's ``DescribeAclsResponse.json``, v1-3, flexible from v2: compact strings and arrays and an empty
tagged-field section ending each struct): resource = resource_type int8, resource_name string, pattern_type
int8, [principal string, host string, operation int8, permission_type int8]. DeleteAcls (``DeleteAclsResponse.json``,
v1-3, flexible from v2): filter result = error_code int16, error_message nullable string, [error_code int16,
error_message nullable string, resource_type int8, resource_name string, pattern_type int8, principal string,
host string, operation int8, permission_type int8]: deleting the ACLs of 10,000 topics answered 10,000 of them in
one kio entity (about 150 ms). The fields around the top array are kio's (``encoded.splice_pieces``); the tests
hold every version's bytes to kio's encoding of the straightforward entity.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from regroup.security.bindings import AclBinding
from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import Pacer, nullable_string, pause, string

__all__ = ["FilterResult", "deleted_acls_answer", "described_acls_answer"]

_TWO_CODES = struct.Struct(">bb")
_ONE_CODE = struct.Struct(">b")
_ERROR_CODE = struct.Struct(">h")
#: a matching ACL's own error code (none) and error message (null), flexible and not
_NO_ERROR = {True: _ERROR_CODE.pack(0) + b"\x00", False: _ERROR_CODE.pack(0) + b"\xff\xff"}


async def described_acls_answer(empty: Any, acls: Sequence[AclBinding], error_codes: tuple[int, ...]) -> PreEncoded:
    """The DescribeAcls answer ``empty`` (its error code and message set, ``resources`` empty) with ``acls``
    grouped by resource pattern, the resources in the order of their first ACL and each one's ACLs in order."""
    flexible = bool(type(empty).__flexible__)
    tags = b"\x00" if flexible else b""
    resources: dict[tuple[int, str, int], list[AclBinding]] = {}
    for binding in acls:
        key = (int(binding.resource_type), binding.resource_name, int(binding.pattern_type))
        found = resources.get(key)
        if found is None:
            resources[key] = [binding]
        else:
            found.append(binding)
    text = _texts(flexible)
    parts: list[bytes] = []
    pacer = Pacer()
    for (resource_type, name, pattern_type), bindings in resources.items():
        parts.append(_ONE_CODE.pack(resource_type) + string(name, flexible) + _ONE_CODE.pack(pattern_type))
        parts.append(array_header(len(bindings), flexible))
        for binding in bindings:
            if pacer.due():
                await pause()
            parts.append(text(binding.principal) + text(binding.host))
            parts.append(_TWO_CODES.pack(int(binding.operation), int(binding.permission)) + tags)
        parts.append(tags)
    return PreEncoded(response_type(empty), splice_pieces(empty, "resources", len(resources), parts), error_codes)


def _texts(flexible: bool) -> Callable[[str], bytes]:
    """``string`` of a value, each distinct value encoded once (one answer's: a few principals, hosts and resource
    names recur over thousands of ACLs)."""
    texts: dict[str, bytes] = {}

    def text(value: str) -> bytes:
        encoded = texts.get(value)
        if encoded is None:
            encoded = texts[value] = string(value, flexible)
        return encoded

    return text


#: a DeleteAcls filter's result: (error code, error message, the ACLs it deleted)
FilterResult = tuple[int, str | None, Sequence[AclBinding]]


async def deleted_acls_answer(empty: Any, results: Sequence[FilterResult], error_codes: tuple[int, ...]) -> PreEncoded:
    """The DeleteAcls answer ``empty`` (``filter_results`` empty) with ``results``, one per filter, in order."""
    flexible = bool(type(empty).__flexible__)
    tags = b"\x00" if flexible else b""
    no_error = _NO_ERROR[flexible]
    text = _texts(flexible)
    parts: list[bytes] = []
    pacer = Pacer()
    for code, message, bindings in results:
        parts.append(
            _ERROR_CODE.pack(code) + nullable_string(message, flexible) + array_header(len(bindings), flexible)
        )
        for binding in bindings:
            if pacer.due():
                await pause()
            parts.append(
                no_error
                + _ONE_CODE.pack(int(binding.resource_type))
                + text(binding.resource_name)
                + _ONE_CODE.pack(int(binding.pattern_type))
                + text(binding.principal)
                + text(binding.host)
                + _TWO_CODES.pack(int(binding.operation), int(binding.permission))
                + tags
            )
        parts.append(tags)
    return PreEncoded(response_type(empty), splice_pieces(empty, "filter_results", len(results), parts), error_codes)

"""The request header read without kio in the common case (``network/codec._header``: a v1 header, or a v2
header without tagged fields) must give what kio's reader gives, or fail where kio fails, for any bytes."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader

from regroup.network.codec import RequestHeaderV1, RequestHeaderV2, _header

HEADERS = (RequestHeaderV1, RequestHeaderV2)


def _kio(data: bytes, header_cls: type[Any]) -> tuple[int, str | None, int] | str:
    try:
        header, used = entity_reader(header_cls)(data, 0)
    except Exception as exc:
        return type(exc).__name__
    return header.correlation_id, header.client_id, used


def _ours(data: bytes, header_cls: type[Any]) -> tuple[int, str | None, int] | str:
    try:
        return _header(data, header_cls)
    except Exception as exc:
        return type(exc).__name__


def _encoded(correlation_id: int, client_id: bytes | None, tags: bytes) -> bytes:
    head = struct.pack(">hhi", 12, 4, correlation_id)
    if client_id is None:
        return head + struct.pack(">h", -1) + tags
    return head + struct.pack(">h", len(client_id)) + client_id + tags


client_ids = st.one_of(
    st.none(),
    st.text(max_size=40).map(str.encode),
    st.binary(max_size=40),  # not always UTF-8
)
#: after the client id: nothing, an empty tagged-field section, one tagged field, or any bytes
tails = st.one_of(
    st.just(b""),
    st.just(b"\x00"),
    st.binary(min_size=1, max_size=8).map(lambda b: b"\x01\x00" + bytes([len(b)]) + b),
    st.binary(max_size=12),
)


@given(
    header_cls=st.sampled_from(HEADERS),
    correlation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    client_id=client_ids,
    tail=tails,
    body=st.binary(max_size=6),
)
def test_a_header_reads_as_kio_reads_it(
    header_cls: type[Any], correlation_id: int, client_id: bytes | None, tail: bytes, body: bytes
) -> None:
    data = _encoded(correlation_id, client_id, tail) + body
    expected = _kio(data, header_cls)
    got = _ours(data, header_cls)
    if isinstance(expected, str):
        assert isinstance(got, str)  # refused either way (the exception's type may differ)
    else:
        assert got == expected


@given(header_cls=st.sampled_from(HEADERS), data=st.binary(max_size=24))
def test_any_bytes_read_as_kio_reads_them(header_cls: type[Any], data: bytes) -> None:
    expected = _kio(data, header_cls)
    got = _ours(data, header_cls)
    assert isinstance(got, str) if isinstance(expected, str) else got == expected


@pytest.mark.parametrize("header_cls", HEADERS)
def test_a_remembered_client_id_is_the_same_text(header_cls: type[Any]) -> None:
    data = _encoded(7, b"consumer-1", b"\x00")
    assert _header(data, header_cls)[1] == "consumer-1"
    assert _header(data, header_cls) == _kio(data, header_cls)


@pytest.mark.parametrize("header_cls", HEADERS)
@pytest.mark.parametrize("length", [-1, -2, -32768, 5, 300])
def test_negative_and_overlong_lengths_read_as_kio_reads_them(header_cls: type[Any], length: int) -> None:
    data = struct.pack(">hhih", 12, 4, 9, length) + b"abc\x00"
    expected, got = _kio(data, header_cls), _ours(data, header_cls)
    assert isinstance(got, str) if isinstance(expected, str) else got == expected

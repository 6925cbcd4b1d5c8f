"""A response body handed over in pieces (``encoded.splice_pieces``, ``PreEncoded`` of pieces) frames to the very
bytes the whole body does, with one join: the pieces of an all-topics Metadata answer are megabytes, and each copy
of them costs the event loop a millisecond. Also the length prefixes the hand-written answers use, kept for small
counts, against kio's."""

from __future__ import annotations

import io
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.serial.writers import write_int32, write_unsigned_varint
from kio.static.primitive import i32

from regroup.network.codec import frame_response
from regroup.server.encoded import PreEncoded, array_header, splice, splice_pieces

METADATA = 3


@given(
    entries=st.lists(st.binary(max_size=40), max_size=20),
    joined=st.booleans(),
    version=st.sampled_from([1, 9, 12]),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
)
def test_pieces_frame_as_the_whole_body(entries: list[bytes], joined: bool, version: int, correlation_id: int) -> None:
    cls = load_response_schema(METADATA, version)
    skeleton = cls(**_empty_metadata_fields(cls))
    items = b"".join(entries) if joined else entries
    pieces = splice_pieces(skeleton, "topics", len(entries), items)
    whole = splice(skeleton, "topics", len(entries), items)
    assert b"".join(pieces) == whole
    if joined:
        assert any(piece is items for piece in pieces)  # an array already joined is not copied
    answer = PreEncoded(cls, pieces, (3,))
    assert answer.pieces == pieces and answer.body == whole and answer.error_codes == (3,)
    assert frame_response(correlation_id, cls, answer.pieces) == frame_response(correlation_id, cls, whole)
    assert PreEncoded(cls, whole).pieces == (whole,)


def _empty_metadata_fields(cls: type) -> dict[str, object]:
    fields: dict[str, object] = {"brokers": (), "topics": (), "controller_id": 0}
    names = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    if "throttle_time" in names:
        fields["throttle_time"] = timedelta(0)
    if "cluster_id" in names:
        fields["cluster_id"] = "c"
    if "cluster_authorized_operations" in names:
        fields["cluster_authorized_operations"] = -2147483648
    return {k: v for k, v in fields.items() if k in names}


@given(count=st.one_of(st.integers(0, 300), st.integers(0, 2**31 - 1)), flexible=st.booleans())
def test_array_headers_are_kios_length_prefixes(count: int, flexible: bool) -> None:
    """``array_header`` keeps the compact headers of small counts: kept or not, each is kio's encoding (an
    unsigned varint of ``count + 1``, or an int32 before flexible versions), the second ask as the first."""
    buffer = io.BytesIO()
    if flexible:
        write_unsigned_varint(buffer, count + 1)
    else:
        write_int32(buffer, i32(count))
    expected = buffer.getvalue()
    assert array_header(count, flexible) == expected
    assert array_header(count, flexible) == expected

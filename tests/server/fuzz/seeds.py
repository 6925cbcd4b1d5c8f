"""The fuzzer's seed corpus: valid, plausible requests for every API and version the server advertises,
encoded by kio into whole frames (size prefix included), each with the positions of its length fields.

Every seed's client id is ``TAG_PREFIX`` + 8 hex digits, a fixed-width slot the runner fills with the
frame's number, so a handler error the server logs ("... from fz-0000002a failed") names the frame."""

from __future__ import annotations

import dataclasses
import io
import random
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from tests.server.fuzz.layout import LengthSite, walk
from tests.server.fuzz.schema import fields_of, served_requests
from tests.server.fuzz.values import RandomChooser, entity_value

SIZE = struct.Struct(">i")
#: frame offsets (size prefix included) of the header's fixed fields
API_KEY_AT, VERSION_AT, CORRELATION_AT, CLIENT_ID_AT = 4, 6, 8, 12
TAG_PREFIX = "fz-"
TAG_AT = CLIENT_ID_AT + 2 + len(TAG_PREFIX)  # the 8 hex digits (after the client id's int16 length)
TAG_DIGITS = 8
TAG_CLIENT_ID = TAG_PREFIX + "0" * TAG_DIGITS


@dataclass(frozen=True, slots=True)
class Seed:
    api_key: int
    version: int
    frame: bytes
    #: every length prefix of the header and body, offsets within ``frame``
    sites: tuple[LengthSite, ...]


def encode_frame(request_cls: type[Any], body: Any, correlation_id: int = 0, client_id: str | None = None) -> bytes:
    """The whole frame of ``body`` (an instance of ``request_cls``) with its request header."""
    header_cls = request_cls.__header_schema__
    buffer = io.BytesIO()
    header = header_cls(
        request_api_key=i16(request_cls.__api_key__),
        request_api_version=i16(request_cls.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_cls)(buffer, header)
    entity_writer(request_cls)(buffer, body)
    payload = buffer.getvalue()
    return SIZE.pack(len(payload)) + payload


def make_seed(request_cls: type[Any], body: Any, client_id: str | None = TAG_CLIENT_ID) -> Seed:
    frame = encode_frame(request_cls, body, 0, client_id)
    header_sites, used = walk(request_cls.__header_schema__, frame, SIZE.size, header=True)
    body_sites, end = walk(request_cls, frame, used)
    if end != len(frame):
        raise AssertionError(f"{request_cls.__name__} v{request_cls.__version__}: layout ends at {end} of {len(frame)}")
    return Seed(int(request_cls.__api_key__), int(request_cls.__version__), frame, (*header_sites, *body_sites))


def corpus(rng: random.Random, per_version: int = 4) -> list[Seed]:
    """``per_version`` plausible seeds of every API version served (one in eight with a null client id)."""
    chooser = RandomChooser(rng)
    seeds = []
    for _, _, cls in served_requests():
        for i in range(per_version):
            client_id = None if i == per_version - 1 and rng.random() < 0.5 else TAG_CLIENT_ID
            seeds.append(make_seed(cls, entity_value(cls, chooser), client_id))
    return seeds


def array_paths(cls: type[Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The paths (field names through nested entity arrays) of every non-nullable, untagged array of ``cls``."""
    paths = []
    for info in fields_of(cls):
        if not info.array or info.tag is not None:
            continue
        if not info.nullable:
            paths.append((*prefix, info.name))
        if info.entity is not None:
            paths.extend(array_paths(info.entity, (*prefix, info.name)))
    return paths


def with_null(body: Any, path: tuple[str, ...], chooser: RandomChooser) -> Any:
    """``body`` with the array at ``path`` null (kio writes a null for any array given None); arrays on
    the way get one element if they are empty."""
    name, rest = path[0], path[1:]
    if not rest:
        return dataclasses.replace(body, **{name: None})
    items = getattr(body, name) or ()
    if not items:
        element = next(info.entity for info in fields_of(type(body)) if info.name == name)
        assert element is not None
        items = (entity_value(element, chooser),)
    return dataclasses.replace(body, **{name: (with_null(items[0], rest, chooser), *items[1:])})

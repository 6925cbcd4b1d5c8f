"""Frames for the fuzzer: seeds mutated at the byte level (bit flips, byte overwrites, truncation,
extension), at the known length fields (huge, negative, null, zero, off by one), in the header (another
version of the API, a version out of range, another or an unknown API key, a header of the wrong
flexibility), by splicing two seeds, and pure random bytes. The size prefix is kept true to the payload,
except for the *framing* mutations (a size that lies, half a prefix): those end their connection
(``Mutant.last``: the sender half-closes after it), since the server cannot know where the next frame starts.

Everything is drawn from one ``random.Random``: the same seed gives the same frames."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.server.fuzz.layout import LengthSite
from tests.server.fuzz.seeds import (
    API_KEY_AT,
    CORRELATION_AT,
    SIZE,
    TAG_AT,
    TAG_CLIENT_ID,
    TAG_DIGITS,
    VERSION_AT,
    Seed,
)
from tests.server_data.batches import uvarint

INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
HUGE_LENGTHS = (2**31 - 1, 2**30, 0x0FFFFFFF, 0x7FFF, 2**16, 2**24)
NEGATIVE_LENGTHS = (-1, -2, -(2**15), -(2**31), -1000)
#: unsigned varints a compact length may be rewritten to (stored = length + 1: 0 is null)
HUGE_UVARINTS = (2**32 - 1, 2**32, 2**31, 2**35 - 1, 2**28, 2**21, 0x7FFF)


@dataclass(frozen=True, slots=True)
class Mutant:
    frame: bytes
    api_key: int
    version: int
    #: how it was made, e.g. ``length(array i32 -1 @53)+bitflip``
    how: str
    #: the frame's framing lies: nothing may follow it on its connection
    last: bool = False

    @property
    def claims(self) -> str:
        """The API and version its header claims (after mutation), e.g. ``15v0``."""
        if len(self.frame) < VERSION_AT + 2:
            return "short"
        key, version = struct.unpack_from(">hh", self.frame, API_KEY_AT)
        return f"{key}v{version}"


class Mutator:
    def __init__(self, rng: random.Random, seeds: Sequence[Seed], versions: dict[int, tuple[int, int]]) -> None:
        self.rng = rng
        self.seeds = list(seeds)
        self.versions = versions
        self.api_keys = sorted(versions)
        weighted: list[tuple[int, Callable[[Seed, bytearray], str]]] = [
            (4, self.bit_flip),
            (4, self.overwrite),
            (3, self.truncate),
            (2, self.extend),
            (10, self.length),
            (3, self.header),
            (2, self.splice),
        ]
        self.mutations = [m for weight, m in weighted for _ in range(weight)]

    def next(self, correlation_id: int, tag: int) -> Mutant:
        """A new frame whose correlation id is ``correlation_id`` and whose client-id tag (where the seed has
        one) is ``tag`` before mutation."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.02:
            return self.random_bytes(correlation_id)
        seed = self.seeds[rng.randrange(len(self.seeds))]
        frame = bytearray(seed.frame)
        struct.pack_into(">i", frame, CORRELATION_AT, correlation_id & 0x7FFFFFFF)
        if frame[CORRELATION_AT + 4 : CORRELATION_AT + 6] == struct.pack(">h", len(TAG_CLIENT_ID)):
            frame[TAG_AT : TAG_AT + TAG_DIGITS] = b"%08x" % (tag & 0xFFFFFFFF)
        if roll < 0.05:
            return Mutant(bytes(frame), seed.api_key, seed.version, "valid")
        if roll < 0.07:
            return self.framing(seed, frame)
        hows = [rng.choice(self.mutations)(seed, frame)]
        while rng.random() < 0.25:
            mutation = rng.choice(self.mutations) if len(frame) > CORRELATION_AT else self.extend
            hows.append(mutation(seed, frame))
        SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
        return Mutant(bytes(frame), seed.api_key, seed.version, "+".join(hows))

    # ------------------------------------------------------------------------------ byte level
    def bit_flip(self, seed: Seed, frame: bytearray) -> str:
        n = self.rng.choice((1, 1, 2, 4))
        for _ in range(n):
            pos = self.rng.randrange(SIZE.size, len(frame))
            frame[pos] ^= 1 << self.rng.randrange(8)
        return f"bitflip{n}"

    def overwrite(self, seed: Seed, frame: bytearray) -> str:
        pos = self.rng.randrange(SIZE.size, len(frame))
        n = min(self.rng.choice((1, 1, 2, 4)), len(frame) - pos)
        for i in range(n):
            frame[pos + i] = self.rng.choice(INTERESTING_BYTES) if self.rng.random() < 0.6 else self.rng.randrange(256)
        return f"overwrite{n}@{pos}"

    def truncate(self, seed: Seed, frame: bytearray) -> str:
        keep = self.rng.randrange(SIZE.size, len(frame))
        del frame[keep:]
        return f"truncate@{keep}"

    def extend(self, seed: Seed, frame: bytearray) -> str:
        extra = self.rng.randbytes(self.rng.randint(1, 64))
        if self.rng.random() < 0.5:
            frame += extra
            return f"append{len(extra)}"
        pos = self.rng.randrange(SIZE.size, len(frame) + 1)
        frame[pos:pos] = extra
        return f"insert{len(extra)}@{pos}"

    # ------------------------------------------------------------------------------ structure
    def length(self, seed: Seed, frame: bytearray) -> str:
        """Rewrite one length prefix (of the seed's layout; earlier mutations may have moved it: then it is
        just another overwrite)."""
        if not seed.sites:
            return self.overwrite(seed, frame)
        site = self.rng.choice(seed.sites)
        if site.offset + site.width > len(frame):
            return self.overwrite(seed, frame)
        value = self._length_value(site)
        if site.encoding == "uvarint":
            frame[site.offset : site.offset + site.width] = uvarint(value)
        else:
            fmt = {"i8": ">b", "i16": ">h", "i32": ">i"}[site.encoding]
            bits = {"i8": 8, "i16": 16, "i32": 32}[site.encoding]
            value = (value + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)  # wrap into the field's range
            struct.pack_into(fmt, frame, site.offset, value)
        return f"length({site.counts} {site.encoding} {site.value}->{value} @{site.offset})"

    def _length_value(self, site: LengthSite) -> int:
        rng = self.rng
        kind = rng.randrange(5)
        if site.encoding == "uvarint":
            if kind == 0:
                return rng.choice(HUGE_UVARINTS)
            if kind == 1:
                return 0  # null (compact) / no tags
            if kind == 2:
                return max(site.value + rng.choice((-1, 1)), 0)
            if kind == 3:
                return site.value + rng.randint(2, 1000)
            return rng.randrange(2**32)
        if kind == 0:
            return rng.choice(HUGE_LENGTHS)
        if kind == 1:
            return rng.choice(NEGATIVE_LENGTHS)
        if kind == 2:
            return site.value + rng.choice((-1, 1))
        if kind == 3:
            return site.value + rng.randint(2, 1000)
        return rng.randrange(-(2**31), 2**31)

    def header(self, seed: Seed, frame: bytearray) -> str:
        rng = self.rng
        kind = rng.randrange(4)
        if kind == 0:  # another version of the same API: the body is read with the wrong schema
            low, high = self.versions[seed.api_key]
            version = rng.randint(low, high)
            struct.pack_into(">h", frame, VERSION_AT, version)
            return f"version->{version}"
        if kind == 1:  # a version out of range
            low, high = self.versions[seed.api_key]
            version = rng.choice((low - 1, high + 1, -1, 2**15 - 1))
            struct.pack_into(">h", frame, VERSION_AT, version)
            return f"version->{version}"
        if kind == 2:  # another served API (its version range may not hold this version)
            key = rng.choice(self.api_keys)
            struct.pack_into(">h", frame, API_KEY_AT, key)
            return f"api_key->{key}"
        key = rng.choice((-1, 2**15 - 1, 4, 57, 1000, rng.randrange(2**15)))
        struct.pack_into(">h", frame, API_KEY_AT, key)
        return f"api_key->{key}"

    def splice(self, seed: Seed, frame: bytearray) -> str:
        other = self.rng.choice(self.seeds).frame
        cut = self.rng.randrange(SIZE.size, len(frame) + 1)
        from_other = self.rng.randrange(SIZE.size, len(other) + 1)
        frame[cut:] = other[from_other:]
        return f"splice@{cut}+{other[4:8].hex()}@{from_other}"

    def random_bytes(self, correlation_id: int) -> Mutant:
        rng = self.rng
        body = rng.randbytes(rng.randint(0, 96))
        if rng.random() < 0.5:  # a served API key and version, then noise
            key = rng.choice(self.api_keys)
            low, high = self.versions[key]
            version = rng.randint(low, high)
            body = struct.pack(">hhi", key, version, correlation_id & 0x7FFFFFFF) + body
            return Mutant(SIZE.pack(len(body)) + body, key, version, "random-body")
        return Mutant(SIZE.pack(len(body)) + body, -1, -1, "random")

    def framing(self, seed: Seed, frame: bytearray) -> Mutant:
        rng = self.rng
        payload = len(frame) - SIZE.size
        kind = rng.randrange(4)
        if kind == 0:
            size = payload + rng.randint(1, 1000)  # promises more than is sent (then end of stream)
        elif kind == 1:
            size = rng.randint(0, max(payload - 1, 0))  # the rest is read as the next frame
        elif kind == 2:
            size = rng.choice((-1, -(2**31), 2**31 - 1, 100 * 1024 * 1024 + 1))
        else:
            return Mutant(bytes(frame[: rng.randint(1, 3)]), seed.api_key, seed.version, "half-prefix", last=True)
        SIZE.pack_into(frame, 0, size)
        return Mutant(bytes(frame), seed.api_key, seed.version, f"framing(size {size} of {payload})", last=True)

"""CRC-32 (zlib's) of two pieces joined, from the CRC of each: ``crc32_joined(crc32(a), crc32(b), len(b))`` equals
``zlib.crc32(a + b)`` without reading ``a`` or ``b`` again.

A batch frame's checksum covers its header (which holds the batch's first offset, known only once the log is
held for the write) and then its body (megabytes for a 10,000-member group's record). With this, the body's
checksum is taken before the log is held, and the header's joined to it inside, in microseconds.

The arithmetic: CRC-32 is, up to its fixed pre- and post-conditioning (which cancel here), the remainder of the
message's polynomial over GF(2) modulo the CRC polynomial. Appending ``n`` bytes multiplies the first piece's
part by ``x^(8n)``; so the joined CRC is ``crc(a) * x^(8n) mod P`` xor ``crc(b)``. Polynomials are held as
zlib holds them, bit-reflected: bit 31 is the coefficient of ``x^0``, bit 0 that of ``x^31``. ``x^(8n)`` is made
from the kept powers ``x^(2^k)``, one product per set bit of ``8n``."""

from __future__ import annotations

from typing import Final

__all__ = ["crc32_joined"]

#: the CRC-32 polynomial, reflected (its ``x^32`` term implied)
_POLY: Final = 0xEDB88320
_ONE: Final = 1 << 31  # x^0


def _times(a: int, b: int) -> int:
    """``a * b mod P``, both reflected."""
    product = 0
    bit = _ONE
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1  # b * x
    return product


def _powers() -> tuple[int, ...]:
    """``x^(2^k) mod P`` for k = 0..63."""
    power = _ONE >> 1  # x^1
    out = [power]
    for _ in range(63):
        power = _times(power, power)
        out.append(power)
    return tuple(out)


_X_TO_2_TO_THE: Final = _powers()


def _x_to_the(exponent: int) -> int:
    """``x^exponent mod P`` (exponent >= 0, below 2^64)."""
    result = _ONE
    k = 0
    while exponent:
        if exponent & 1:
            result = _times(_X_TO_2_TO_THE[k], result)
        exponent >>= 1
        k += 1
    return result


def crc32_joined(crc_first: int, crc_second: int, second_length: int) -> int:
    """``zlib.crc32(first + second)`` from ``zlib.crc32(first)``, ``zlib.crc32(second)`` and ``len(second)``."""
    if second_length < 0:
        raise ValueError("a length is not negative")
    if second_length == 0:
        return crc_first & 0xFFFF_FFFF
    return _times(_x_to_the(8 * second_length), crc_first & 0xFFFF_FFFF) ^ (crc_second & 0xFFFF_FFFF)

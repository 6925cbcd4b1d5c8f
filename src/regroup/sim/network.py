"""The in-memory network between each member and the coordinator: per-message latency (fixed + uniform
jitter), loss, duplication and partitions (a member cut off from the coordinator: every message sent or
arriving while it lasts is dropped). All randomness comes from the seeded ``random.Random`` the simulator
passes in, and is drawn only when a fault is configured, so a fault-free run draws nothing.

Each direction of a link is FIFO, like the TCP connection a Kafka client holds: a message never overtakes
one sent before it on the same link (jitter only delays).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from regroup.sim.scenario import LinkSpec

TO_COORDINATOR: Final = "request"
TO_MEMBER: Final = "response"


def uniform_jitter(rng: random.Random, jitter_ms: int) -> int:
    """``rng.randint(0, jitter_ms)``, drawing exactly what it draws (``getrandbits`` of the bit length of
    ``jitter_ms + 1``, again while too large), without randint's three Python-level calls per message."""
    bound = jitter_ms + 1
    bits = bound.bit_length()
    value = rng.getrandbits(bits)
    while value >= bound:
        value = rng.getrandbits(bits)
    return value


@dataclass(slots=True)
class Transmission:
    """Delivery times of a message (two for a duplicate), or why it was dropped."""

    deliveries: tuple[int, ...]
    dropped: str | None = None


class Network:
    def __init__(self, default: LinkSpec, rng: random.Random) -> None:
        self.default = default
        self.rng = rng
        self.links: dict[str, LinkSpec] = {}
        self.isolated: set[str] = set()
        # the last delivery time per direction, then per member (str keys: their hashes are cached)
        self._last_delivery: dict[str, dict[str, int]] = {}

    def spec(self, member: str) -> LinkSpec:
        return self.links.get(member, self.default)

    def change(self, member: str | None, changes: dict[str, float]) -> None:
        """Change some link fields for one member's link, or for every link (``member`` None)."""

        def changed(spec: LinkSpec) -> LinkSpec:
            return LinkSpec(
                latency_ms=int(changes.get("latency_ms", spec.latency_ms)),
                jitter_ms=int(changes.get("jitter_ms", spec.jitter_ms)),
                loss=float(changes.get("loss", spec.loss)),
                duplicate=float(changes.get("duplicate", spec.duplicate)),
            )

        if member is None:
            self.default = changed(self.default)
            self.links = {m: changed(spec) for m, spec in self.links.items()}
        else:
            self.links[member] = changed(self.spec(member))

    def isolate(self, member: str) -> None:
        self.isolated.add(member)

    def heal(self, member: str) -> None:
        self.isolated.discard(member)

    def reachable(self, member: str) -> bool:
        return member not in self.isolated

    def transmit(self, member: str, direction: str, now_ms: int) -> Transmission:
        """Send one message on ``member``'s link in ``direction``: when does it arrive (if at all)?"""
        if member in self.isolated:
            return Transmission((), "isolated")
        spec = self.links.get(member, self.default)
        rng = self.rng
        if spec.loss > 0 and rng.random() < spec.loss:
            return Transmission((), "lost")
        duplicated = spec.duplicate > 0 and rng.random() < spec.duplicate  # (drawn before the jitter)
        last = self._last_delivery.get(direction)
        if last is None:
            last = self._last_delivery[direction] = {}
        at = max(now_ms + _delay(spec, rng), last.get(member, 0))
        if not duplicated:
            last[member] = at
            return Transmission((at,))
        again = max(now_ms + _delay(spec, rng), at)
        last[member] = again
        return Transmission((at, again))


def _delay(spec: LinkSpec, rng: random.Random) -> int:
    """One message's latency on ``spec``'s link (jitter drawn only when there is some)."""
    return spec.latency_ms + (uniform_jitter(rng, spec.jitter_ms) if spec.jitter_ms > 0 else 0)

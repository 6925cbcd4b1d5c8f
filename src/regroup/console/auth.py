"""HTTP Basic authentication (RFC 7617) against the broker's own SASL users: a PLAIN user's password as the
listeners' JAAS configuration gives it, or a SCRAM user's, checked the way a SCRAM exchange would: StoredKey derived
from the password with the stored salt and iteration count, compared with the stored one in constant time.

Deriving a SCRAM key costs thousands of hash rounds, so it runs off the event loop, and a pair that passed is
remembered (by a keyed digest of the password, never the password itself) while the user's credential stays the
same: a dashboard polling every second costs one derivation, not one per request."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final

from regroup.console.http import Request, Response, text
from regroup.security.scram import MECHANISMS, ScramCredential, credential_from_password

__all__ = ["BasicAuth", "credentials_of"]

REALM: Final = "regroup"
REMEMBERED: Final = 256

ScramLookup = Callable[[str, str], ScramCredential | None]


def credentials_of(request: Request) -> tuple[str, str] | None:
    """The (user, password) of a request's ``Authorization: Basic ...`` header, None without a usable one."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon and user else None


class BasicAuth:
    """``await check(request)``: None when the request may go on, else the 401 to answer."""

    def __init__(self, plain_users: Mapping[str, str], scram: ScramLookup | None) -> None:
        self._plain = dict(plain_users)
        self._scram = scram
        self._key = os.urandom(32)
        #: (user, keyed digest of the password) -> the stored key it matched
        self._passed: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()

    async def check(self, request: Request) -> Response | None:
        given = credentials_of(request)
        if given is not None and await self.valid(*given):
            return None
        return text(401, "authentication required", ("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"'))

    async def valid(self, user: str, password: str) -> bool:
        expected = self._plain.get(user)
        if expected is not None:
            return hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))
        if self._scram is None:
            return False
        digest = hmac.new(self._key, password.encode("utf-8"), hashlib.sha256).digest()
        for mechanism in MECHANISMS.values():
            credential = self._scram(mechanism.name, user)
            if credential is None:
                continue
            remembered = self._passed.get((user, digest))
            if remembered is not None and hmac.compare_digest(remembered, credential.stored_key):
                return True
            derived = await asyncio.to_thread(
                credential_from_password, mechanism, password, credential.salt, credential.iterations
            )
            if hmac.compare_digest(derived.stored_key, credential.stored_key):
                self._passed[(user, digest)] = credential.stored_key
                while len(self._passed) > REMEMBERED:
                    self._passed.popitem(last=False)
                return True
        return False

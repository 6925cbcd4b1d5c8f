"""The broker's SCRAM credentials (KIP-554): per user and mechanism the salt, StoredKey, ServerKey and iteration
count — never a password — kept durably in ``scram-credentials.json`` of the data directory.

Written by AlterUserScramCredentials (``handlers/scram_users.py``) and by ``regroup users`` on a stopped
server; read by the SCRAM exchanges (``security/scram.py``) through :meth:`ScramStore.lookup`. Each change
rewrites the whole file atomically (fsynced when ``sync``) before it is acknowledged; the file is created
readable by its owner only.

AlterUserScramCredentials is applied with Kafka's rules (the controller's ``ScramControlManager``), user by user:
a user named more than once in one request (deletions and upsertions together) is DUPLICATE_RESOURCE; an empty
user name is UNACCEPTABLE_CREDENTIAL; a mechanism other than SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) is
UNSUPPORTED_SASL_MECHANISM; fewer iterations than the mechanism's minimum (4096) or more than its maximum (16384)
is UNACCEPTABLE_CREDENTIAL ("Too few iterations", "Too many iterations"); deleting a credential that does not
exist is RESOURCE_NOT_FOUND. regroup adds bounds of its own, all UNACCEPTABLE_CREDENTIAL: a salt and a salted
password must be 1 to 1024 bytes, a user name at most 1024 UTF-8 bytes, and at most :data:`MAX_USERS` users may
have credentials. The users that pass are changed together, in one write.

A shell module: :class:`ScramStore` does the file I/O. A damaged file stops the server at start-up with one line
(:class:`~regroup.storage.format.CorruptLogError`), as ``group-configs.json`` does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from regroup.model.errors import ErrorCode
from regroup.security.scram import (
    MECHANISMS,
    ScramCredential,
    ScramMechanism,
    credential_from_password,
    credential_from_salted_password,
    mechanism_named,
    mechanism_of_type,
)
from regroup.server.durable_change import written_then
from regroup.storage.files import write_file_atomically
from regroup.storage.format import CorruptLogError

__all__ = [
    "MAX_USERS",
    "SCRAM_CREDENTIALS_FILE",
    "AlterResult",
    "ScramDeletion",
    "ScramStore",
    "ScramStoreError",
    "ScramUpsertion",
]

SCRAM_CREDENTIALS_FILE: Final = "scram-credentials.json"
FORMAT_VERSION: Final = 1
#: most users with SCRAM credentials (each change rewrites the whole file)
MAX_USERS: Final = 100_000
MAX_USER_BYTES: Final = 1024
MAX_SECRET_BYTES: Final = 1024

TOO_MANY_USERS: Final = f"Too many users with SCRAM credentials (at most {MAX_USERS})"


class ScramStoreError(ValueError):
    """A credential ``add_user`` or ``delete_user`` refuses (one line, never a password)."""


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """Set ``user``'s credential for the mechanism of Kafka's wire code ``mechanism`` from a salted password."""

    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"ScramUpsertion({self.user!r}, mechanism={self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    """Remove ``user``'s credential for the mechanism of Kafka's wire code ``mechanism``."""

    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AlterResult:
    """One user's outcome: ``ErrorCode.NONE`` or the error, with Kafka's message."""

    user: str
    error: ErrorCode
    message: str | None = None


class ScramStore:
    """Every user's SCRAM credentials, kept in one JSON file at ``path``."""

    def __init__(self, path: Path, sync: bool = True) -> None:
        self.path = path
        self._sync = sync
        #: user -> mechanism name -> credential
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        #: held by a change written aside (``alter_aside``), from its plan to its taking effect
        self._changing = asyncio.Lock()

    # ------------------------------------------------------------------ reading

    def load(self) -> None:
        """Read the file (none: no user has a credential). Damage raises :class:`CorruptLogError`."""
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self._credentials = {}
            return
        except (OSError, ValueError) as exc:
            raise CorruptLogError(f"{self.path}: unreadable SCRAM credentials: {_one_line(exc)}") from None
        try:
            self._credentials = _decode(raw)
        except ValueError as exc:
            raise CorruptLogError(f"{self.path}: damaged SCRAM credentials: {exc}") from None

    def lookup(self, mechanism_name: str, user: str) -> ScramCredential | None:
        """``user``'s credential for the mechanism, None when there is none."""
        return self._credentials.get(user, {}).get(mechanism_name)

    def users(self) -> dict[str, list[tuple[str, int]]]:
        """Every user with a credential: its (mechanism name, iterations), users and mechanisms in name order."""
        return {
            user: [(name, credential.iterations) for name, credential in sorted(by_mechanism.items())]
            for user, by_mechanism in sorted(self._credentials.items())
        }

    # ------------------------------------------------------------------ AlterUserScramCredentials

    def alter(self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[ScramDeletion]) -> list[AlterResult]:
        """Apply an AlterUserScramCredentials request (the module's rules): one result per user named, in the
        order users first appear (deletions first). The accepted changes are written in one atomic write before
        this returns; if the write fails (``OSError``), nothing changes and the error propagates."""
        results, updated = self._plan(upsertions, deletions)
        if updated is not None:
            self._replace(updated)
        return results

    async def alter_aside(
        self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[ScramDeletion]
    ) -> list[AlterResult]:
        """``alter``, the file encoded and written on a worker thread (every user's credentials, fsynced: it held
        the event loop about 30 ms for 1,000 users). Such changes are one at a time (``_changing``), each planned
        against the credentials the one before left, which serve every authentication until the file is
        written; the new ones serve from then on, even if the request is cancelled meanwhile
        (``durable_change.written_then``: a credential deleted on disk never goes on authenticating)."""
        await self._changing.acquire()
        try:
            results, updated = self._plan(upsertions, deletions)
        except BaseException:
            self._changing.release()
            raise
        if updated is None:
            self._changing.release()
            return results
        await written_then(
            self._changing, functools.partial(self._write, updated), functools.partial(self._adopt, updated)
        )
        return results

    def _adopt(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        self._credentials = credentials

    def _plan(
        self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[ScramDeletion]
    ) -> tuple[list[AlterResult], dict[str, dict[str, ScramCredential]] | None]:
        """``alter``'s results, and every user's credentials afterwards (None: nothing changes)."""
        errors: dict[str, AlterResult] = {}
        accepted_deletions: dict[str, ScramDeletion] = {}
        accepted_upsertions: dict[str, ScramUpsertion] = {}
        order: dict[str, None] = {}  # (the users in the order first named: a dict, as a request may name thousands)
        for deletion in deletions:
            user = deletion.user
            order.setdefault(user)
            if user in errors:
                continue
            if accepted_deletions.pop(user, None) is not None:
                errors[user] = _duplicate(user)
                continue
            error = self._check_deletion(deletion)
            if error is not None:
                errors[user] = error
            else:
                accepted_deletions[user] = deletion
        for upsertion in upsertions:
            user = upsertion.user
            order.setdefault(user)
            if user in errors:
                continue
            if accepted_deletions.pop(user, None) is not None or accepted_upsertions.pop(user, None) is not None:
                errors[user] = _duplicate(user)
                continue
            error = _check_upsertion(upsertion)
            if error is not None:
                errors[user] = error
            else:
                accepted_upsertions[user] = upsertion
        updated = {user: dict(by_mechanism) for user, by_mechanism in self._credentials.items()}
        changed = bool(accepted_deletions)
        for user, deletion in accepted_deletions.items():
            mechanism = mechanism_of_type(deletion.mechanism)
            assert mechanism is not None  # (checked)
            del updated[user][mechanism.name]
            if not updated[user]:
                del updated[user]
        for user, upsertion in accepted_upsertions.items():
            mechanism = mechanism_of_type(upsertion.mechanism)
            assert mechanism is not None  # (checked)
            if user not in updated and len(updated) >= MAX_USERS:
                errors[user] = AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_USERS)
                continue
            credential = credential_from_salted_password(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
            )
            updated.setdefault(user, {})[mechanism.name] = credential
            changed = True
        results = [errors.get(user) or AlterResult(user, ErrorCode.NONE) for user in order]
        return results, updated if changed else None

    def _check_deletion(self, deletion: ScramDeletion) -> AlterResult | None:
        error = _check_user_and_mechanism(deletion.user, deletion.mechanism)
        if error is not None:
            return error
        mechanism = mechanism_of_type(deletion.mechanism)
        assert mechanism is not None
        if self.lookup(mechanism.name, deletion.user) is None:
            return AlterResult(
                deletion.user,
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return None

    # ------------------------------------------------------------------ the seeding command

    def add_user(self, mechanism: str, user: str, password: str, iterations: int, salt: bytes) -> None:
        """Set ``user``'s credential for ``mechanism`` (a name) from ``password``, durably; raises
        :class:`ScramStoreError` for what AlterUserScramCredentials would refuse, or an empty password."""
        found = mechanism_named(mechanism)
        if found is None:
            raise ScramStoreError(f"unknown SCRAM mechanism {mechanism!r}: use one of {', '.join(MECHANISMS)}")
        if not user:
            raise ScramStoreError("Username must not be empty")
        if len(user.encode("utf-8")) > MAX_USER_BYTES:
            raise ScramStoreError(f"Username longer than {MAX_USER_BYTES} bytes")
        if not password:
            raise ScramStoreError("the password must not be empty")
        if not found.min_iterations <= iterations <= found.max_iterations:
            raise ScramStoreError(
                f"{found.name} needs {found.min_iterations} to {found.max_iterations} iterations, not {iterations}"
            )
        if not 1 <= len(salt) <= MAX_SECRET_BYTES:
            raise ScramStoreError(f"the salt must be 1 to {MAX_SECRET_BYTES} bytes")
        if user not in self._credentials and len(self._credentials) >= MAX_USERS:
            raise ScramStoreError(TOO_MANY_USERS)
        updated = {u: dict(by_mechanism) for u, by_mechanism in self._credentials.items()}
        updated.setdefault(user, {})[found.name] = credential_from_password(found, password, salt, iterations)
        self._replace(updated)

    def delete_user(self, user: str, mechanism: str | None = None) -> list[str]:
        """Remove ``user``'s credential for ``mechanism`` (a name), or all of them when None, durably; the
        mechanisms removed. Raises :class:`ScramStoreError` when there is nothing to remove."""
        if mechanism is not None and mechanism_named(mechanism) is None:
            raise ScramStoreError(f"unknown SCRAM mechanism {mechanism!r}: use one of {', '.join(MECHANISMS)}")
        current = self._credentials.get(user, {})
        removed = sorted(current) if mechanism is None else [mechanism] if mechanism in current else []
        if not removed:
            what = f"{mechanism} credential" if mechanism is not None else "SCRAM credentials"
            raise ScramStoreError(f"user {user!r} has no {what}")
        updated = {u: dict(by_mechanism) for u, by_mechanism in self._credentials.items()}
        for name in removed:
            del updated[user][name]
        if not updated[user]:
            del updated[user]
        self._replace(updated)
        return removed

    # ------------------------------------------------------------------ writing

    def _replace(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        self._write(credentials)
        self._credentials = credentials

    def _write(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        text = json.dumps(_encode(credentials), sort_keys=True, indent=1) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _create_private(self.path.with_name(self.path.name + ".tmp"))
        write_file_atomically(self.path, text.encode("utf-8"), sync=self._sync)


def _create_private(tmp: Path) -> None:
    """Create ``tmp`` readable by its owner only, so the atomic write (which reuses it) keeps that mode."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- the rules


def _duplicate(user: str) -> AlterResult:
    return AlterResult(
        user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    )


def _check_user_and_mechanism(user: str, mechanism: int) -> AlterResult | None:
    if not user:
        return AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism_of_type(mechanism) is None:
        return AlterResult(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    if len(user.encode("utf-8")) > MAX_USER_BYTES:
        return AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username longer than {MAX_USER_BYTES} bytes")
    return None


def _check_upsertion(upsertion: ScramUpsertion) -> AlterResult | None:
    user = upsertion.user
    error = _check_user_and_mechanism(user, upsertion.mechanism)
    if error is not None:
        return error
    mechanism = mechanism_of_type(upsertion.mechanism)
    assert mechanism is not None
    if upsertion.iterations < mechanism.min_iterations:
        return AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if upsertion.iterations > mechanism.max_iterations:
        return AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    if not 1 <= len(upsertion.salt) <= MAX_SECRET_BYTES:
        return AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salt must be 1 to {MAX_SECRET_BYTES} bytes")
    if not 1 <= len(upsertion.salted_password) <= MAX_SECRET_BYTES:
        return AlterResult(
            user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salted password must be 1 to {MAX_SECRET_BYTES} bytes"
        )
    return None


# ---------------------------------------------------------------------- the file


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode(credentials: dict[str, dict[str, ScramCredential]]) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "users": {
            user: {
                name: {
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                    "iterations": c.iterations,
                }
                for name, c in by_mechanism.items()
            }
            for user, by_mechanism in credentials.items()
        },
    }


_FIELDS: Final = frozenset({"salt", "stored_key", "server_key", "iterations"})


def _decode(raw: Any) -> dict[str, dict[str, ScramCredential]]:
    """The credentials of a parsed file; ``ValueError`` (one line, naming the user) for anything amiss."""
    if not isinstance(raw, dict) or raw.get("version") != FORMAT_VERSION or not isinstance(raw.get("users"), dict):
        raise ValueError(f"not an object with version {FORMAT_VERSION} and an object of users")
    users: dict[str, Any] = raw["users"]
    if len(users) > MAX_USERS:
        raise ValueError(f"more than {MAX_USERS} users")
    out: dict[str, dict[str, ScramCredential]] = {}
    for user, by_mechanism in users.items():
        if not user or not isinstance(by_mechanism, dict) or not by_mechanism:
            raise ValueError(f"user {user!r}: not a non-empty object of mechanisms")
        decoded: dict[str, ScramCredential] = {}
        for name, entry in by_mechanism.items():
            mechanism = mechanism_named(name)
            if mechanism is None:
                raise ValueError(f"user {user!r}: unknown mechanism {name!r}")
            decoded[name] = _credential(mechanism, entry, f"user {user!r}, {name}")
        out[user] = decoded
    return out


def _credential(mechanism: ScramMechanism, entry: Any, where: str) -> ScramCredential:
    if not isinstance(entry, dict) or set(entry) != _FIELDS:
        raise ValueError(f"{where}: not an object of {', '.join(sorted(_FIELDS))}")
    iterations = entry["iterations"]
    if (
        not isinstance(iterations, int)
        or isinstance(iterations, bool)
        or not mechanism.min_iterations <= iterations <= mechanism.max_iterations
    ):
        raise ValueError(f"{where}: iterations outside {mechanism.min_iterations}..{mechanism.max_iterations}")
    values: dict[str, bytes] = {}
    for key in ("salt", "stored_key", "server_key"):
        text = entry[key]
        try:
            if not isinstance(text, str):
                raise ValueError
            values[key] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: {key} is not base64") from None
    if not values["salt"]:
        raise ValueError(f"{where}: empty salt")
    for key in ("stored_key", "server_key"):
        if len(values[key]) != mechanism.digest_size:
            raise ValueError(f"{where}: {key} is not {mechanism.digest_size} bytes")
    return ScramCredential(values["salt"], values["stored_key"], values["server_key"], iterations)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__

"""The ACLs, kept durably in ``acls.json`` of the data directory and served by the authorizer
(``security/authorizer.py``), which this store fills at start and changes only after the file says so.

CreateAcls and DeleteAcls each rewrite the whole file with one atomic replacement (fsynced when ``sync``; the
server's handlers have it done on a worker thread, one change at a time, ``create_aside`` / ``delete_aside``)
*before* the authorizer changes: an ACL change acknowledged survives a crash, and a write that fails changes
nothing. Every filter of one DeleteAcls is matched against the ACLs as they were before it, as Kafka's
controller does, so an ACL two filters select is reported under both.

The file: ``{"version": 1, "acls": [[resource type, resource name, pattern type, principal, host, operation,
permission], ...]}`` with Kafka's names of the enum values (``["TOPIC", "orders", "LITERAL", "User:alice",
"*", "READ", "ALLOW"]``). A file that is not this, or holds an ACL CreateAcls would refuse, stops the start
(``CorruptLogError``); a missing one is no ACLs.

At most :data:`MAX_ACLS` ACLs: each change rewrites the file (about 70 bytes an ACL, so a few MB at the bound),
and a CreateAcls that would pass the bound creates nothing and answers each new ACL with INVALID_REQUEST.

A shell module: the file I/O is here, the ACL logic in ``regroup.security``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterable, Sequence
from enum import IntEnum
from pathlib import Path
from typing import Any, Final, TypeVar

from regroup.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.authorizer import Authorizer
from regroup.security.bindings import AclBinding, AclBindingFilter, validate_binding
from regroup.server.durable_change import written_then
from regroup.storage.files import write_file_atomically
from regroup.storage.format import CorruptLogError

__all__ = ["ACL_FILE", "FILE_VERSION", "MAX_ACLS", "AclStore"]

ACL_FILE: Final = "acls.json"
FILE_VERSION: Final = 1
#: most ACLs the broker holds (each change rewrites the file)
MAX_ACLS: Final = 100_000

E = TypeVar("E", bound=IntEnum)


class AclStore:
    """The durable ACLs of ``path`` and the ``authorizer`` that enforces them."""

    def __init__(self, path: Path, sync: bool, authorizer: Authorizer) -> None:
        self.path = path
        self._sync = sync
        self.authorizer = authorizer
        #: held by a change written aside, from its plan to its authorizer update
        self._changing = asyncio.Lock()

    def load(self) -> None:
        """Read the file into the authorizer (replacing what it held). Damage raises ``CorruptLogError``."""
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raw = {"version": FILE_VERSION, "acls": []}
        except (OSError, ValueError) as exc:
            raise CorruptLogError(f"{self.path}: unreadable ACLs: {exc}") from None
        bindings = _decode(self.path, raw)
        self.authorizer.discard(self.authorizer.bindings())
        self.authorizer.add(bindings)

    def create(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Create ``bindings``: for each, None when it exists afterwards (new or already there) or why it was
        refused (INVALID_REQUEST). The new ones are durable before this returns; a failed write raises
        ``OSError`` and creates none."""
        errors, new = self._plan_create(bindings)
        if new:
            self._write([*self.authorizer.bindings(), *new])
            self.authorizer.add(new)
        return errors

    async def create_aside(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """``create``, the file written on a worker thread (``_write_aside``)."""
        await self._changing.acquire()
        try:
            errors, new = self._plan_create(bindings)
        except BaseException:
            self._changing.release()
            raise
        if not new:
            self._changing.release()
            return errors
        await self._write_aside([*self.authorizer.bindings(), *new], functools.partial(self.authorizer.add, new))
        return errors

    def _plan_create(self, bindings: Sequence[AclBinding]) -> tuple[list[str | None], list[AclBinding]]:
        """Each binding's refusal (or None), and the ACLs to add (none: nothing to write)."""
        errors: list[str | None] = [validate_binding(b) for b in bindings]
        fresh = [e is None and b not in self.authorizer for b, e in zip(bindings, errors, strict=True)]
        new = list(dict.fromkeys(b for b, is_new in zip(bindings, fresh, strict=True) if is_new))
        if new and len(self.authorizer) + len(new) > MAX_ACLS:
            full = f"The broker holds at most {MAX_ACLS} ACLs"
            return [full if is_new else e for e, is_new in zip(errors, fresh, strict=True)], []
        return errors, new

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete the ACLs each filter (checked already: ``validate_filter``) selects; returns them per filter.
        Durable before this returns; a failed write raises ``OSError`` and deletes none."""
        matched, gone = self._plan_delete(filters)
        if gone:
            self._write([b for b in self.authorizer.bindings() if b not in gone])
            self.authorizer.discard(gone)
        return matched

    async def delete_aside(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """``delete``, the file written on a worker thread (``_write_aside``)."""
        await self._changing.acquire()
        try:
            matched, gone = self._plan_delete(filters)
        except BaseException:
            self._changing.release()
            raise
        if not gone:
            self._changing.release()
            return matched
        kept = [b for b in self.authorizer.bindings() if b not in gone]
        await self._write_aside(kept, functools.partial(self.authorizer.discard, gone))
        return matched

    def _plan_delete(self, filters: Sequence[AclBindingFilter]) -> tuple[list[list[AclBinding]], set[AclBinding]]:
        """The ACLs each filter selects (against the ACLs as they are now), and all of them together."""
        matched = [self.authorizer.describe(f) for f in filters]
        return matched, {b for found in matched for b in found}

    async def _write_aside(self, bindings: list[AclBinding], then: Callable[[], object]) -> None:
        """``_write`` on a worker thread (``_changing`` held by the caller): the whole file encoded and fsynced
        there (at 10,000 ACLs about 700 KB, which held the event loop for tens of milliseconds a change), then
        ``then`` changes the authorizer and ``_changing`` is let go, both once the file is written, even if the
        request is cancelled meanwhile (``durable_change.written_then``): changes made this way are one at a time,
        and every decision follows the ACLs on disk."""
        await written_then(self._changing, functools.partial(self._write, bindings), then)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.describe(acl_filter)

    def _write(self, bindings: Iterable[AclBinding]) -> None:
        rows = ",\n".join(json.dumps(_encode(b)) for b in bindings)
        text = f'{{"version": {FILE_VERSION}, "acls": [\n{rows}\n]}}\n'
        write_file_atomically(self.path, text.encode("utf-8"), sync=self._sync)


def _encode(b: AclBinding) -> list[str]:
    return [
        b.resource_type.name,
        b.resource_name,
        b.pattern_type.name,
        b.principal,
        b.host,
        b.operation.name,
        b.permission.name,
    ]


def _decode(path: Path, raw: Any) -> list[AclBinding]:
    if not isinstance(raw, dict) or raw.get("version") != FILE_VERSION or not isinstance(raw.get("acls"), list):
        raise CorruptLogError(f'{path}: not an object {{"version": {FILE_VERSION}, "acls": [...]}}')
    out = []
    for index, row in enumerate(raw["acls"]):
        if not isinstance(row, list) or len(row) != 7 or not all(isinstance(v, str) for v in row):
            raise CorruptLogError(f"{path}: ACL #{index} is not a list of 7 strings")
        try:
            binding = AclBinding(
                _member(ResourceType, row[0]),
                row[1],
                _member(PatternType, row[2]),
                row[3],
                row[4],
                _member(AclOperation, row[5]),
                _member(AclPermissionType, row[6]),
            )
        except KeyError as exc:
            raise CorruptLogError(f"{path}: ACL #{index}: unknown value {exc}") from None
        problem = validate_binding(binding)
        if problem is not None:
            raise CorruptLogError(f"{path}: ACL #{index}: {problem}")
        out.append(binding)
    return out


def _member(enum: type[E], name: str) -> E:
    return enum[name]

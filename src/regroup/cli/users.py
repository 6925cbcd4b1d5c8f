"""``regroup users``: the SCRAM users of a stopped server's data directory (``scram-credentials.json``), the idea
of Kafka's ``kafka-storage format --add-scram``: seed the first users before the server starts, so that a client
can authenticate and then manage users with AlterUserScramCredentials.

    regroup users add --data-dir DIR --mechanism SCRAM-SHA-512 --user alice --password secret [--iterations 8192]
    regroup users list --data-dir DIR
    regroup users delete --data-dir DIR --user alice [--mechanism SCRAM-SHA-512]

``add`` stores only the salted credential (a fresh 32-byte salt from ``os.urandom``), never the password;
``--password-file`` reads the password from a file's first line instead of the command line. ``list`` prints one
line per credential: user, mechanism, iterations (tab-separated). The command takes the data directory's lock
(the one ``regroup serve`` holds on ``DIR/coordinator``), so it refuses to run beside a running server: that one
changes users with AlterUserScramCredentials. Errors print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Final

from regroup.security.scram import MECHANISMS, SCRAM_SHA_256
from regroup.server.scram_store import SCRAM_CREDENTIALS_FILE, ScramStore, ScramStoreError
from regroup.storage.format import StorageError
from regroup.storage.record_log import lock_directory

__all__ = ["UsersError", "add_parser", "run"]

EXIT_USAGE: Final = 2
SALT_BYTES: Final = 32
DEFAULT_ITERATIONS: Final = SCRAM_SHA_256.min_iterations  # (Kafka's default for both mechanisms: 4096)


class UsersError(Exception):
    """A problem with what the user gave or with the data directory: one line, exit 2."""


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "users",
        help="add, list or delete the SCRAM users of a stopped server's data directory",
        description=(
            "Manage the SCRAM credentials (SCRAM-SHA-256, SCRAM-SHA-512) kept in a stopped `regroup serve`'s data "
            "directory. Only salted credentials are stored, never passwords."
        ),
    )
    # (a missing command is reported with the usage: `cli.main.missing_command`)
    actions = parser.add_subparsers(dest="users_command", required=False, metavar="{add,list,delete}")
    mechanisms = ", ".join(MECHANISMS)

    add = actions.add_parser("add", help="add a user's credential, or replace it")
    add.add_argument("--data-dir", required=True, help="the server's --data-dir (created if missing)")
    add.add_argument("--mechanism", required=True, help=f"one of {mechanisms}")
    add.add_argument("--user", required=True, help="the user name")
    secret = add.add_mutually_exclusive_group(required=True)
    secret.add_argument("--password", help="the password (visible to other local users in the process list)")
    secret.add_argument("--password-file", help="a file whose first line is the password")
    add.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help=f"SCRAM iterations, 4096 to 16384 (default {DEFAULT_ITERATIONS})",
    )

    listing = actions.add_parser("list", help="list the users, their mechanisms and iterations")
    listing.add_argument("--data-dir", required=True, help="the server's --data-dir")

    delete = actions.add_parser("delete", help="delete a user's credentials")
    delete.add_argument("--data-dir", required=True, help="the server's --data-dir")
    delete.add_argument("--user", required=True, help="the user name")
    delete.add_argument("--mechanism", help=f"only this mechanism's credential ({mechanisms}); default: all")


def run(args: argparse.Namespace) -> int:
    """Run ``regroup users ...``; errors are reported here (one line on stderr) as exit code 2."""
    try:
        return _run(args)
    except UsersError as exc:
        print(f"regroup: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    command: str = args.users_command
    mechanism: str | None = getattr(args, "mechanism", None)
    if mechanism is not None and mechanism not in MECHANISMS:
        raise UsersError(f"unknown SCRAM mechanism {mechanism!r}: use one of {', '.join(MECHANISMS)}")
    if command == "add":
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            (data_dir / "coordinator").mkdir(exist_ok=True)
        except OSError as exc:
            raise UsersError(f"cannot use data dir {data_dir}: {exc.strerror or exc}") from None
    elif not data_dir.is_dir():
        raise UsersError(f"data dir {data_dir} does not exist or is not a directory")
    lock = _lock(data_dir)
    try:
        store = ScramStore(data_dir / SCRAM_CREDENTIALS_FILE, sync=True)
        try:
            store.load()
            if command == "add":
                return _add(store, args)
            if command == "delete":
                return _delete(store, args)
            return _list(store)
        except (ScramStoreError, StorageError) as exc:
            raise UsersError(str(exc)) from None
        except UnicodeError:
            raise UsersError("the user name and password must be valid text") from None
        except OSError as exc:
            raise UsersError(f"{getattr(exc, 'filename', None) or data_dir}: {exc.strerror or exc}") from None
    finally:
        if lock is not None:
            os.close(lock)


def _lock(data_dir: Path) -> int | None:
    """The data directory's lock (``coordinator/LOCK``, held by a running server), or None when the directory
    was never served from (nothing to lock) or the platform has no ``flock``."""
    coordinator = data_dir / "coordinator"
    if not coordinator.is_dir():
        return None
    try:
        return lock_directory(coordinator, owner="regroup process")
    except StorageError:
        raise UsersError(f"data dir {data_dir} is in use by a running regroup serve; stop it first") from None
    except OSError as exc:
        raise UsersError(f"cannot use data dir {data_dir}: {exc.strerror or exc}") from None


def _add(store: ScramStore, args: argparse.Namespace) -> int:
    password: str | None = args.password
    if args.password_file is not None:
        try:
            with open(args.password_file, encoding="utf-8") as fh:
                password = fh.readline().rstrip("\r\n")
        except OSError as exc:
            raise UsersError(f"cannot read {args.password_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsersError(f"cannot read {args.password_file}: not UTF-8 text") from None
    assert password is not None  # (one of the two is required)
    store.add_user(args.mechanism, args.user, password, args.iterations, os.urandom(SALT_BYTES))
    print(f"added {args.mechanism} credential of user {args.user!r} ({args.iterations} iterations)")
    return 0


def _delete(store: ScramStore, args: argparse.Namespace) -> int:
    removed = store.delete_user(args.user, args.mechanism)
    print(f"deleted the {', '.join(removed)} credential(s) of user {args.user!r}")
    return 0


def _list(store: ScramStore) -> int:
    for user, mechanisms in store.users().items():
        for mechanism, iterations in mechanisms:
            print(f"{user}\t{mechanism}\t{iterations}")
    return 0

"""``regroup repair``: check a stopped server's data directory for damage, and truncate or quarantine it.

Without ``--truncate`` or ``--quarantine`` it is a dry run: every segment of the coordinator's log, of the
transaction coordinator's log and of the selected partitions is verified in full, and each problem is printed
with what either repair would do and which offsets it would lose. Exit codes: 0 — nothing stops ``regroup
serve`` from starting (torn tails and interrupted segment rolls, which the server settles by itself, may be
listed); 1 — damage found (dry run) or left (a problem with no automatic repair); 2 — bad arguments, or the
data directory is missing or in use by a running server. The repairs themselves are
:mod:`regroup.storage.repair`; docs/storage.md and docs/topic-data.md describe them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regroup.storage.damage import UnitFormat
from regroup.storage.repair import Finding, Mode, RepairError, inspect, repair

__all__ = ["RepairUsageError", "add_parser", "run"]

EXIT_CLEAN = 0
EXIT_DAMAGED = 1


class RepairUsageError(Exception):
    """Bad arguments or an unusable data directory: one line, exit 2."""


@dataclass(frozen=True, slots=True)
class _Target:
    directory: Path
    fmt: UnitFormat
    expected: Callable[[str], bool]
    quarantine: Path
    floor: Callable[[list[str]], int] = lambda names: 0


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "repair",
        help="check a stopped server's data directory for damage; truncate or quarantine it",
        description=(
            "Verify the coordinator logs and the partition logs of a stopped `regroup serve` in full. Without "
            "--truncate or --quarantine nothing is changed: each problem is reported with what either repair "
            "would do. No repair hands out an offset twice."
        ),
    )
    parser.add_argument("--data-dir", required=True, help="the server's --data-dir")
    parser.add_argument("--topic", help="only this topic's partitions")
    parser.add_argument("--partition", type=int, metavar="P", help="only this partition of --topic")
    parser.add_argument(
        "--coordinator", action="store_true", help="only the coordinator logs (groups' and transactions')"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--truncate", action="store_true", help="cut each damaged file at its first bad unit (loses what follows)"
    )
    mode.add_argument(
        "--quarantine",
        action="store_true",
        help="move damaged bytes to DATA_DIR/quarantine/ and keep every intact unit after them",
    )


def run(args: argparse.Namespace) -> int:
    from regroup.storage.format import StorageError
    from regroup.storage.record_log import lock_directory

    data_dir = Path(args.data_dir)
    if args.partition is not None and args.topic is None:
        raise RepairUsageError("--partition needs --topic")
    if args.coordinator and args.topic is not None:
        raise RepairUsageError("--coordinator and --topic exclude each other")
    if not data_dir.is_dir():
        raise RepairUsageError(f"data dir {data_dir} does not exist or is not a directory")
    mode = Mode.TRUNCATE if args.truncate else Mode.QUARANTINE if args.quarantine else None
    coordinator_dir, topics_dir = data_dir / "coordinator", data_dir / "topics"
    transactions_dir = data_dir / "transactions"
    locks: list[int] = []
    try:
        try:
            for directory in (coordinator_dir, transactions_dir, topics_dir):
                if directory.is_dir():
                    fd = lock_directory(directory)
                    if fd is not None:
                        locks.append(fd)
        except StorageError:
            raise RepairUsageError(f"data dir {data_dir} is in use by a running regroup serve; stop it first") from None
        except OSError as exc:
            raise RepairUsageError(f"cannot use data dir {data_dir}: {exc.strerror or exc}") from None
        try:
            return _check(args, data_dir, mode)
        except OSError as exc:
            raise RepairUsageError(f"{getattr(exc, 'filename', None) or data_dir}: {exc.strerror or exc}") from None
    finally:
        for fd in locks:
            os.close(fd)


def _check(args: argparse.Namespace, data_dir: Path, mode: Mode | None) -> int:
    targets, above = _targets(args, data_dir)
    findings = above + [f for t in targets for f in inspect(t.directory, t.fmt, t.quarantine, t.expected, t.floor)]
    damage = [f for f in findings if not f.torn]
    if mode is None:
        print(f"checked {data_dir} (dry run: nothing was changed)")
        for finding in findings:
            _print_finding(finding)
        if not findings:
            print("no damage found")
            return EXIT_CLEAN
        print(
            f"{len(damage)} problem(s) that stop regroup serve from starting, {len(findings) - len(damage)} torn "
            "tail(s) or interrupted roll(s) it settles by itself; rerun with --quarantine (keeps every intact unit) "
            "or --truncate"
        )
        return EXIT_DAMAGED if damage else EXIT_CLEAN
    done: list[str] = []
    failed: list[str] = []
    for finding in above:  # stray files beside the partitions, unreadable topic metadata
        if finding.plan(mode) is None:
            failed.append(f"{finding.path}: {finding.problem}")
        else:
            done.append(_move_aside(finding.path, data_dir))
    for target in targets:
        try:
            done += repair(target.directory, target.fmt, mode, target.quarantine, target.expected, target.floor)
        except RepairError as exc:
            failed.append(str(exc))
    for line in done:
        print(f"repaired {line}")
    for line in failed:
        print(f"not repaired: {line}", file=sys.stderr)
    if failed:
        return EXIT_DAMAGED
    print(f"{len(done)} change(s); {data_dir} is consistent again" if done else f"no damage found in {data_dir}")
    return EXIT_CLEAN


def _print_finding(finding: Finding) -> None:
    print(f"{finding.path}: {finding.problem}")
    if finding.truncate == finding.quarantine:
        print(f"  repair: {finding.truncate or 'none automatic'}")
        return
    print(f"  --truncate:   {finding.truncate or 'none automatic'}")
    print(f"  --quarantine: {finding.quarantine or 'none automatic'}")


# ---------------------------------------------------------------------- what to check


def _targets(args: argparse.Namespace, data_dir: Path) -> tuple[list[_Target], list[Finding]]:
    """The log directories in scope, and the problems found above them (topic metadata, stray files)."""
    from regroup.server.topic_configs import expected_in_topic_dir
    from regroup.storage.partition_log import BATCHES
    from regroup.storage.record_log import FRAMES, expected_name, snapshot_floor
    from regroup.storage.segment_swap import expected_name as expected_in_partition

    quarantine = data_dir / "quarantine"
    targets: list[_Target] = []
    findings: list[Finding] = []
    if args.topic is None:
        coordinator = data_dir / "coordinator"
        targets.append(_Target(coordinator, FRAMES, expected_name, quarantine / "coordinator", snapshot_floor))
        transactions = data_dir / "transactions"
        if transactions.is_dir():  # (a data directory from before transactions has none)
            targets.append(_Target(transactions, FRAMES, expected_name, quarantine / "transactions", snapshot_floor))
    if args.coordinator:
        return targets, findings
    topics_root = data_dir / "topics" / "topics"
    if args.topic is not None:
        names = [args.topic]
        if not (topics_root / args.topic).is_dir():
            raise RepairUsageError(f"no topic {args.topic!r} in {data_dir}")
    else:
        names = sorted(e.name for e in topics_root.iterdir()) if topics_root.is_dir() else []
    for name in names:
        topic_dir = topics_root / name
        q_topic = quarantine / "topics" / name
        if not topic_dir.is_dir():
            fix = f"move it to {q_topic}"
            findings.append(Finding(topic_dir, "unexpected file among the topics", fix, fix))
            continue
        try:
            partitions = int(json.loads((topic_dir / "topic.json").read_text(encoding="utf-8"))["partitions"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problem = f"unreadable topic metadata ({exc}): restore topic.json or move the topic's directory away"
            findings.append(Finding(topic_dir / "topic.json", problem, None, None))
            continue
        wanted = range(partitions)
        if args.partition is not None:
            if not 0 <= args.partition < partitions:
                raise RepairUsageError(f"topic {name!r} has partitions 0..{partitions - 1}, not {args.partition}")
            wanted = range(args.partition, args.partition + 1)
        for entry in sorted(topic_dir.iterdir()):
            known = entry.name == "topic.json" or expected_in_topic_dir(entry.name)
            if not known and not (entry.name.isdigit() and entry.name == str(int(entry.name))
                                  and int(entry.name) < partitions):  # fmt: skip
                fix = f"move it to {q_topic / entry.name}"
                findings.append(Finding(entry, "unexpected file in a topic directory", fix, fix))
        for p in wanted:
            targets.append(_Target(topic_dir / str(p), BATCHES, expected_in_partition, q_topic / str(p)))
    return targets, findings


def _move_aside(path: Path, data_dir: Path) -> str:
    """Move a stray file from under ``topics/topics/`` to the same place under ``quarantine/topics/``."""
    relative = path.relative_to(data_dir / "topics" / "topics")
    target = data_dir / "quarantine" / "topics" / relative
    n = 1
    while target.exists():
        target = target.with_name(f"{relative.name}.{n}")
        n += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(target))
    return f"{path}: moved it to {target}"

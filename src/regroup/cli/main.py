"""The ``regroup`` command line: argument parsing and error reporting for every subcommand.

Errors in what the user gave (files, JSON, options) print one line on stderr and exit with code 2;
nothing prints a traceback.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from regroup import __version__
from regroup.assignors import registry
from regroup.assignors.spec import AssignmentError
from regroup.cli.groups import GroupsUsageError
from regroup.cli.groups import add_parser as add_groups_parser
from regroup.cli.groups import run as run_groups
from regroup.cli.lab import LabError, LabFailure, LabInterrupted
from regroup.cli.lab import add_parser as add_lab_parser
from regroup.cli.lab import run as run_lab
from regroup.cli.repair import RepairUsageError
from regroup.cli.repair import add_parser as add_repair_parser
from regroup.cli.repair import run as run_repair
from regroup.cli.serve import ServeError
from regroup.cli.serve import add_parser as add_serve_parser
from regroup.cli.serve import run as run_serve
from regroup.cli.simulate import SimulateError
from regroup.cli.simulate import add_parser as add_simulate_parser
from regroup.cli.simulate import run as run_simulation
from regroup.cli.users import add_parser as add_users_parser
from regroup.cli.users import run as run_users

EXIT_USAGE = 2


class UsageError(Exception):
    """A problem with what the user gave us; reported as one line (after the usage, when given), exit 2."""

    def __init__(self, message: str, usage: str | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        for action in self._actions:  # "argument lab_command: invalid choice ..." names no internal dest
            if isinstance(action, argparse._SubParsersAction):
                for name in (action.metavar, action.dest):
                    if isinstance(name, str):
                        message = message.replace(f"argument {name}: ", _where(self))
        raise UsageError(message)


def _where(parser: argparse.ArgumentParser) -> str:
    """``"lab: "`` for ``regroup lab``'s parser, ``""`` for ``regroup``'s own."""
    where = parser.prog.removeprefix("regroup").strip()
    return f"{where}: " if where else ""


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="regroup", description="Kafka consumer-group coordination, assignors and rebalance lab.")
    parser.add_argument("--version", action="version", version=f"regroup {__version__}")
    # a missing command is reported by ``missing_command``, with the usage (argparse would name the dest)
    sub = parser.add_subparsers(dest="command", required=False, parser_class=_Parser)

    assign = sub.add_parser("assign", help="compute a partition assignment from a JSON group description")
    assign.add_argument("--strategy", required=True, help="assignment strategy name (see `regroup strategies`)")
    assign.add_argument("--input", help="JSON file to read (default: standard input)")
    assign.add_argument("--indent", type=int, default=None, help="pretty-print the output JSON")
    assign.add_argument(
        "--explain",
        action="store_true",
        help="say why each partition whose owner changed moved: lost owner, balance or rack (docs/assignors.md)",
    )

    sub.add_parser("strategies", help="list the known assignment strategies")
    sub.add_parser("demo", help="KIP-54's worked examples, round-robin and sticky side by side")
    add_simulate_parser(sub)
    add_serve_parser(sub)
    add_lab_parser(sub)
    add_repair_parser(sub)
    add_users_parser(sub)
    add_groups_parser(sub)
    return parser


def missing_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> UsageError | None:
    """The error of a command line that stops before a command ``parser`` (or a command's own parser) needs:
    it names the commands to choose from and carries the usage of the parser that stopped."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen is None:
                commands = ", ".join(action.choices)
                return UsageError(f"{_where(parser)}missing command (one of {commands})", usage=parser.format_usage())
            subparser: argparse.ArgumentParser = action.choices[chosen]
            return missing_command(subparser, args)
    return None


def _read_input(path: str | None) -> bytes:
    if path is None:
        binary = getattr(sys.stdin, "buffer", None)  # a text stream in place of stdin has none
        return binary.read() if binary is not None else sys.stdin.read().encode("utf-8")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _cmd_assign(args: argparse.Namespace) -> int:
    # millions of acyclic ints, lists and dicts from reading the input to writing the output: the cyclic
    # collector would only rescan them, over and over
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _assign(args)
    finally:
        if was_enabled:
            gc.enable()


def _assign(args: argparse.Namespace) -> int:
    # imported here: NumPy and the JSON reader are the assign command's alone
    from regroup.assignors import metrics
    from regroup.cli.assign_explain import ExplainError, explain
    from regroup.cli.assign_input import InputError, NotUtf8Error, parse_document
    from regroup.cli.assign_run import assignment_of, render

    try:
        assignor = registry.get(args.strategy)
    except (registry.UnknownAssignorError, registry.AssignorLoadError) as exc:
        raise UsageError(str(exc)) from None
    data = _read_input(args.input)
    try:
        spec, previous = parse_document(data)
    except NotUtf8Error as exc:
        raise UsageError(f"cannot read {args.input}: not UTF-8 text" if args.input else str(exc)) from None
    except InputError as exc:
        raise UsageError(str(exc)) from None
    try:
        assignment = assignment_of(assignor, spec)
    except AssignmentError as exc:
        raise UsageError(f"{args.strategy}: {exc}") from None
    report = metrics.summary(spec, assignment, previous)
    report.update(assignor.extra_metrics(spec, assignment))
    doc: dict[str, object] = {"assignment": {m: dict(pt) for m, pt in assignment.items()}, "metrics": report}
    if args.explain:
        try:
            doc["explain"] = explain(spec, assignment)
        except ExplainError as exc:
            raise UsageError(f"--explain: {exc}") from None
    out = render(doc, args.indent)
    binary = getattr(sys.stdout, "buffer", None)  # a text stream in place of stdout has none
    if binary is None:
        sys.stdout.write(out.decode("utf-8"))
    else:
        sys.stdout.flush()
        binary.write(out)
        binary.flush()
    return 0


def _cmd_strategies(_: argparse.Namespace) -> int:
    for name in registry.available():
        print(name)
    return 0


def _cmd_demo(_: argparse.Namespace) -> int:
    from regroup.cli.demo import render

    print(render())
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    try:
        return run_simulation(args)
    except SimulateError as exc:
        raise UsageError(str(exc)) from None


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        return run_serve(args)
    except ServeError as exc:
        raise UsageError(str(exc)) from None


def _cmd_lab(args: argparse.Namespace) -> int:
    try:
        return run_lab(args)
    except LabError as exc:
        raise UsageError(str(exc)) from None


def _cmd_repair(args: argparse.Namespace) -> int:
    try:
        return run_repair(args)
    except RepairUsageError as exc:
        raise UsageError(str(exc)) from None


def _cmd_groups(args: argparse.Namespace) -> int:
    try:
        return run_groups(args)
    except GroupsUsageError as exc:
        raise UsageError(str(exc)) from None


COMMANDS = {
    "assign": _cmd_assign,
    "strategies": _cmd_strategies,
    "demo": _cmd_demo,
    "simulate": _cmd_simulate,
    "serve": _cmd_serve,
    "lab": _cmd_lab,
    "repair": _cmd_repair,
    "users": run_users,
    "groups": _cmd_groups,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``regroup`` console script."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        missing = missing_command(parser, args)
        if missing is not None:
            raise missing
        return COMMANDS[args.command](args)
    except UsageError as exc:
        if exc.usage is not None:
            sys.stderr.write(exc.usage)
        print(f"regroup: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LabFailure as exc:
        print(f"regroup: {exc}", file=sys.stderr)
        return 1
    except LabInterrupted:
        print("regroup: interrupted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: still one line, never a traceback
        print(f"regroup: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

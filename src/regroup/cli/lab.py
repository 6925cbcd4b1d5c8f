"""``regroup lab``: the PySpark rebalance lab (docs/lab.md).

* ``regroup lab sweep GRID --out DIR [--master URL]`` simulates every run of a scenario grid on Spark;
* ``regroup lab analyze EVENTS... --out DIR [--master URL]`` reads event logs (simulator or server): in this
  process, without Spark, when no ``--master`` is given and the files are small (``jobs.IN_PROCESS_BYTES``);
* ``regroup lab report DIR`` renders ``DIR/report.html`` again from the Parquet tables (pyarrow, no Spark);
* ``regroup lab validate SCENARIO --out DIR [--repeat N] [--replay]`` checks a scenario's predictions against
  real clients (``lab.validate``; no Spark); with ``--replay`` also the replays of the recorded server logs;
* ``regroup lab replay EVENTS --out DIR [--group G] [--strategies ...] [--protocols ...]`` replays a recorded
  group's churn under other strategies and protocols (``lab.replay``) on Spark (``--no-spark``: in this process)
  and reports each one's costs against the recorded run's.

sweep and analyze write ``DIR/runs/`` and ``DIR/rebalances/`` (Parquet), ``DIR/lab.json`` and
``DIR/report.html``. Every command first checks what the lab needs (its ``lab`` extra, Java 17 or newer) and
says what to install (Java only when the command starts Spark). The Spark JVM's own output goes to
``DIR/spark.log``. Input problems are checked before Spark starts where possible and print one line
(``regroup: <file>: <what is wrong>``), exit 2; a failed Spark job is one line too, exit 1; Ctrl-C cancels
the Spark jobs, stops Spark and prints ``regroup: interrupted``, exit 130. Progress goes to stderr, the
report's path to stdout.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any


class LabError(Exception):
    """A problem with what the user gave (grid, event file, output directory) or with what the lab needs
    (its extra, Java); one line, exit 2."""


class LabFailure(Exception):
    """Spark could not start or a Spark job failed; one line, exit 1."""


class LabInterrupted(Exception):
    """Ctrl-C: the jobs were cancelled and Spark stopped; exit 130."""


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "lab",
        help="the PySpark rebalance lab: sweep a scenario grid, analyze event logs, render the report",
        description="Measure what strategies, protocols, group sizes and churn cost (docs/lab.md).",
    )
    # (a missing command is reported with the usage: `cli.main.missing_command`)
    commands = parser.add_subparsers(dest="lab_command", required=False, parser_class=type(parser))
    sweep = commands.add_parser("sweep", help="simulate every run of a scenario grid (YAML or JSON)")
    sweep.add_argument("grid", help="grid file (YAML or JSON)")
    sweep.add_argument("--out", required=True, metavar="DIR", help="output directory")
    _spark_options(sweep)
    analyze = commands.add_parser("analyze", help="metrics of event logs from `simulate --events` or `serve --events`")
    analyze.add_argument("events", nargs="+", metavar="EVENTS", help="event log files (JSON lines)")
    analyze.add_argument("--out", required=True, metavar="DIR", help="output directory")
    _spark_options(analyze)
    analyze.add_argument(
        "--measure-from-ms",
        type=int,
        default=0,
        metavar="MS",
        help="rebalances starting earlier are the formation phase, left out of the run totals (default 0)",
    )
    report = commands.add_parser("report", help="render DIR/report.html again from DIR's tables (no Spark)")
    report.add_argument("dir", metavar="DIR", help="a directory written by sweep or analyze")
    _spark_options(report, hidden=True)  # accepted as before, unused: the report reads the tables without Spark
    validate = commands.add_parser(
        "validate", help="run a simulator scenario in the simulator and with real clients, and compare the metrics"
    )
    validate.add_argument("scenario", metavar="SCENARIO", help="a simulator scenario file (docs/simulator.md)")
    validate.add_argument("--out", required=True, metavar="DIR", help="output directory")
    validate.add_argument("--repeat", type=_positive, default=3, metavar="N", help="real runs (default 3)")
    validate.add_argument("--seeds", type=_positive, default=20, metavar="K", help="simulator seeds (default 20)")
    validate.add_argument(
        "--replay",
        action="store_true",
        help="also replay each real run's server log under the same strategy and compare it with what was measured",
    )
    _replay_parser(commands)


#: ``lab.replay_run``'s defaults, written out so that building the parser imports no lab module
REPLAY_STRATEGIES = "range roundrobin sticky cooperative-sticky uniform"
REPLAY_PROTOCOLS = "eager cooperative consumer"


def _replay_parser(commands: argparse._SubParsersAction[Any]) -> None:
    replay = commands.add_parser(
        "replay", help="replay a recorded group's churn under other strategies and protocols, against what happened"
    )
    replay.add_argument("events", metavar="EVENTS", help="an event log from `serve --events` or `simulate --events`")
    replay.add_argument("--out", required=True, metavar="DIR", help="output directory")
    replay.add_argument("--group", default=None, metavar="G", help="the group to replay (a server log with several)")
    replay.add_argument(
        "--strategies", nargs="+", default=None, metavar="S",
        help=f"strategies to replay under (default: {REPLAY_STRATEGIES})",
    )  # fmt: skip
    replay.add_argument(
        "--protocols", nargs="+", default=None, metavar="P",
        help=f"protocols to replay under (default: {REPLAY_PROTOCOLS})",
    )  # fmt: skip
    replay.add_argument("--since-ms", type=int, default=None, metavar="N", help="window start, in the log's clock")
    replay.add_argument("--until-ms", type=int, default=None, metavar="N", help="window end, in the log's clock")
    replay.add_argument(
        "--settings", default=None, metavar="FILE",
        help="the members' settings (YAML or JSON: a grid's `settings` fields); default: the grid defaults",
    )  # fmt: skip
    replay.add_argument("--no-spark", action="store_true", help="simulate in this process, without Spark")
    _spark_options(replay)


def _spark_options(parser: argparse.ArgumentParser, hidden: bool = False) -> None:
    parser.add_argument(
        "--master",
        default=None,
        help=argparse.SUPPRESS
        if hidden
        else "Spark master URL (default local[*]; analyze without it reads small inputs in this process, no Spark)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=argparse.SUPPRESS if hidden else "a Spark setting, e.g. spark.executor.memory=2g (repeatable)",
    )


def _conf(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LabError(f"--conf {item!r}: must be KEY=VALUE")
        out[key.strip()] = value
    return out


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _validate(args: argparse.Namespace) -> int:
    """``lab validate``: no Spark; a scenario a real run cannot play is a one-line error."""
    from regroup.lab.real_run import RealRunError
    from regroup.lab.validate import validate
    from regroup.sim.scenario import ScenarioError, load

    try:
        scenario = load(args.scenario)
    except ScenarioError as exc:
        raise LabError(str(exc)) from None
    out = _out_dir(args.out)
    started = time.monotonic()
    try:
        document = validate(scenario, out, repeat=args.repeat, seeds=args.seeds, say=_say, replay=args.replay)
    except RealRunError as exc:
        raise LabError(f"{args.scenario}: {exc}") from None
    for row in document["rows"]:
        _say(validate_line(row))
    for row in document.get("replay_rows", []):
        _say(validate_line(row, "replayed"))
    _say(f"done in {time.monotonic() - started:.1f} s of wall time in all")
    print(out / "validation.html")
    return 0


def validate_line(row: dict[str, Any], side: str = "predicted") -> str:
    """A row of ``validation.json`` as the command prints it, with its verdict in words (``side``: ``predicted``,
    or ``replayed`` for a row of ``replay_rows``)."""
    from regroup.lab.validate import verdict_words

    verdict = verdict_words(row["metric"], row["within_target"])
    return f"{row['protocol']} {row['metric']}: {side} {row[side]:g}, measured {row['measured']:g}: {verdict}"


def _out_dir(path: str) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabError(f"{path}: cannot create the output directory: {exc.strerror}") from None
    if not out.is_dir():
        raise LabError(f"{path}: not a directory")
    return out


#: where the Spark JVM's own output goes, in the output directory
SPARK_LOG = "spark.log"


def _say(text: str) -> None:
    print(f"regroup lab: {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from regroup.lab import preflight
    from regroup.lab.errors import LabInputError

    # validate, report and a small analyze run no Spark job: they need the lab's extra but not Java
    missing = preflight.problem() if _uses_spark(args) else preflight.extra_problem()
    if missing is not None:
        raise LabError(missing)
    warnings.filterwarnings("ignore", module="pyspark")  # e.g. pandas version notes; not the user's concern
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # a cancelled call is reported by the command
    try:
        if args.lab_command == "validate":
            return _validate(args)
        if args.lab_command == "report":
            return _report(args)
        if args.lab_command == "replay":
            return _replay(args)
        return _run(args)
    except LabInputError as exc:
        raise LabError(str(exc)) from None
    except KeyboardInterrupt:  # outside a Spark job (Interrupts covers the jobs)
        raise LabInterrupted() from None


def _uses_spark(args: argparse.Namespace) -> bool:
    """sweep always; analyze with ``--master`` or more than ``jobs.IN_PROCESS_BYTES`` of event files."""
    if args.lab_command == "sweep":
        return True
    if args.lab_command == "replay":
        return not args.no_spark
    if args.lab_command == "analyze":
        from regroup.lab import jobs

        return args.master is not None or jobs.input_bytes(args.events) > jobs.IN_PROCESS_BYTES
    return False


def _replay(args: argparse.Namespace) -> int:
    """``lab replay``: every input checked (and the recorded run measured) before Spark starts."""
    from regroup.lab import failures, frames, jobs, replay_run, session
    from regroup.lab.errors import LabInputError

    conf = _conf(args.conf)
    started = time.monotonic()
    prepared = replay_run.prepare(
        args.events,
        group=args.group,
        since_ms=args.since_ms,
        until_ms=args.until_ms,
        strategies=_names(args.strategies) or replay_run.DEFAULT_STRATEGIES,
        protocol_names=_names(args.protocols) or replay_run.DEFAULT_PROTOCOLS,
        settings=replay_run.read_settings(args.settings) if args.settings else None,
    )
    out = _out_dir(args.out)
    plan = prepared.plan
    _say(
        f"replay: group {plan.group_id or '(simulator log)'}, {len(plan.members)} members, {len(plan.events)} "
        f"changes in {plan.duration_ms} ms; {len(prepared.tasks)} alternatives"
    )
    if args.no_spark:
        found = replay_run.here(prepared, _say)
        meta = replay_run.meta_of(prepared, "none (in this process)")
        meta["simulated in"] = f"{found.seconds or 0:.1f} s"
        _say(f"writing {out}/runs and {out}/rebalances")
        frames.write(found, out)
        _done(started, replay_run.finish(found, prepared, out, meta).report)
        return 0
    master = args.master or session.DEFAULT_MASTER
    meta = replay_run.meta_of(prepared, master)
    _say(f"starting Spark on {master} (its output: {out / SPARK_LOG})")
    try:
        spark = session.start(master, conf=conf, log_file=out / SPARK_LOG)
    except Exception as exc:
        raise LabFailure(f"cannot start Spark on {master}: {failures.one_line(exc)} (see {out / SPARK_LOG})") from None
    try:
        with session.Interrupts(spark) as interrupts:
            try:
                if interrupts.interrupted:
                    raise LabInterrupted()
                computed = replay_run.on_spark(spark, prepared)
                meta["simulated in"] = f"{computed.seconds or 0:.1f} s"
                _say(f"writing {out}/runs and {out}/rebalances")
                jobs.write(computed, out)
                if interrupts.interrupted:
                    raise LabInterrupted()
            except (LabInterrupted, LabInputError):
                raise
            except Exception as exc:
                if interrupts.interrupted:
                    raise LabInterrupted() from None
                raise LabFailure(f"the Spark job failed: {failures.one_line(exc)}") from None
    finally:
        session.stop(spark)
    found = frames.read(out)
    _done(started, replay_run.finish(found, prepared, out, meta).report)
    return 0


def _names(values: list[str] | None) -> tuple[str, ...]:
    """``--strategies a b`` or ``--strategies a,b``."""
    return tuple(name for value in values or () for name in value.split(",") if name)


def _report(args: argparse.Namespace) -> int:
    """``lab report``: the tables read with pyarrow, no Spark."""
    from regroup.lab import report

    started = time.monotonic()
    out = Path(args.dir)
    if not out.is_dir():
        raise LabError(f"{args.dir}: no such directory")
    found, meta = report.load(out)
    target = report.write(found, meta, out)
    _say(f"report rendered in {time.monotonic() - started:.1f} s")
    print(target)
    return 0


def _run(args: argparse.Namespace) -> int:
    from regroup.lab import failures, frames, grid, jobs, report, session
    from regroup.lab.errors import LabInputError

    conf = _conf(args.conf)
    started = time.monotonic()
    master = args.master or session.DEFAULT_MASTER
    meta: dict[str, Any]
    if args.lab_command == "sweep":
        g = grid.load(args.grid)
        runs = grid.expand(g)
        out = _out_dir(args.out)
        note = g.seed_note()
        if note is not None:
            _say(f"note: {note}")
        meta = {
            "title": f"grid {g.name}",
            "source": args.grid,
            "runs": len(runs),
            "skipped (strategy/protocol cannot run)": [
                f"{s}/{p}" if why == "cannot run" else f"{s}/{p} ({why})" for (s, p), why in g.skipped() if why
            ],
            "master": master,
            "axes": g.describe_axes(),
            "settings": g.settings.to_json(),
        }
    else:
        jobs.precheck(args.events)
        out = _out_dir(args.out)
        meta = {"title": f"{len(args.events)} event log(s)", "source": args.events}
        if not _uses_spark(args):
            found = jobs.analyze_here(args.events, measure_from_ms=args.measure_from_ms)
            _say(f"writing {out}/runs and {out}/rebalances")
            frames.write(found, out)
            meta |= {"master": "none (in this process)", "measure_from_ms": args.measure_from_ms}
            meta["analysed in"] = f"{found.seconds:.1f} s"
            target = report.write(found, meta, out)
            _done(started, target)
            return 0
        meta |= {"master": master, "measure_from_ms": args.measure_from_ms}
    _say(f"starting Spark on {master} (its output: {out / SPARK_LOG})")
    try:
        spark = session.start(master, conf=conf, log_file=out / SPARK_LOG)
    except Exception as exc:  # a bad --master, a JVM that exits, ...: one line, not the JVM's stack trace
        raise LabFailure(f"cannot start Spark on {master}: {failures.one_line(exc)} (see {out / SPARK_LOG})") from None
    try:
        with session.Interrupts(spark) as interrupts:
            try:
                if interrupts.interrupted:
                    raise LabInterrupted()
                if args.lab_command == "sweep":
                    tables = jobs.sweep(spark, runs)
                    meta["simulated in"] = f"{tables.seconds:.1f} s"
                else:
                    tables = jobs.analyze(spark, args.events, measure_from_ms=args.measure_from_ms)
                    meta["analysed in"] = f"{tables.seconds:.1f} s"
                if interrupts.interrupted:
                    raise LabInterrupted()
                _say(f"writing {out}/runs and {out}/rebalances")
                jobs.write(tables, out)
                if interrupts.interrupted:
                    raise LabInterrupted()
            except (LabInterrupted, LabInputError):
                raise
            except Exception as exc:
                if interrupts.interrupted:
                    raise LabInterrupted() from None
                raise LabFailure(f"the Spark job failed: {failures.one_line(exc)}") from None
    finally:
        session.stop(spark)
    found, _ = report.load(out)  # the tables as written; the report needs no Spark
    target = report.write(found, meta, out)
    _done(started, target)
    return 0


def _done(started: float, target: Path) -> None:
    _say(f"done in {time.monotonic() - started:.1f} s of wall time in all")
    print(target)

"""librdkafka's own integration tests against ``regroup serve`` (``make librdkafka-tests``; not part of
``make test``).

Builds librdkafka and its test runner once in a cache directory outside the repository
(``$REGROUP_LIBRDKAFKA_CACHE``, default ``~/.cache/regroup/librdkafka``) from ``$LIBRDKAFKA_GIT`` (a git URL
or a local repository) at ``$LIBRDKAFKA_REF``, then runs each chosen test against a fresh ``regroup serve``
(free loopback port, temporary data directory), with ``group.protocol`` classic and, with
``--protocol consumer``, KIP-848's consumer protocol (the suite's ``TEST_CONSUMER_GROUP_PROTOCOL``). Each
test's output goes to ``<cache>/results/<protocol>/<test>.log``; the summary (one line per test: passed,
failed or skipped, seconds, the first failure line) is printed and written as JSON next to the logs.

    python tests/librdkafka/run.py [--protocol classic|consumer|both] [--tests 0018,0030,...] [--timeout 300]

Needs git, a C/C++ compiler and make (libssl-dev and zlib1g-dev for TLS and gzip, optional). The default
tests are the suite's consumer-group, offset and rebalance tests that use a real broker (the mock-cluster
ones test librdkafka alone, and the runner leaves them out: ``-L``). docs/compatibility.md records the results
and why each failure fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_GIT = "https://github.com/confluentinc/librdkafka.git"
DEFAULT_REF = "v2.15.0"
#: what the suite believes the broker is: it skips tests that need a newer Kafka, and runs the KIP-848
#: ones only from 4.0
KAFKA_VERSION = "4.0.0"
#: consumer groups, offsets, rebalances, subscriptions and partition changes, against a real broker
DEFAULT_TESTS = (
    "0018,0019,0026,0029,0030,0033,0040,0041,0042,0044,0045,0048,0050,0056,0069,0089,0091,0099,0102,"
    "0113,0118,0122,0125,0127,0130,0132,0137,0140"
)
CONFIGURE = ["./configure", "--no-download", "--disable-gssapi", "--disable-curl", "--disable-zstd"]
#: the suite's broker creates topics on first use with 4 partitions (its default scenario's num.partitions)
AUTO_CREATED_PARTITIONS = 4
START_TIMEOUT_S = 20.0


@dataclass
class Outcome:
    test: str
    protocol: str
    result: str  # passed / failed / skipped / timeout / error
    seconds: float
    reason: str


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "regroup" / "librdkafka"
    return Path(os.environ.get("REGROUP_LIBRDKAFKA_CACHE", default))


def run(command: list[str], cwd: Path, log: Path) -> None:
    with log.open("ab") as out:
        status = subprocess.call(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if status != 0:
        raise SystemExit(f"librdkafka-tests: {' '.join(command)} failed in {cwd} (exit {status}); see {log}")


def build(cache: Path) -> Path:
    """The ``tests`` directory of a built librdkafka (cloned and built on first use)."""
    source = cache / "src"
    ref = os.environ.get("LIBRDKAFKA_REF", DEFAULT_REF)
    stamp = cache / f"built-{ref}"
    if stamp.exists() and (source / "tests" / "test-runner").exists():
        return source / "tests"
    cache.mkdir(parents=True, exist_ok=True)
    log = cache / "build.log"
    if not source.exists():
        run(["git", "clone", "--quiet", os.environ.get("LIBRDKAFKA_GIT", DEFAULT_GIT), str(source)], cache, log)
    run(["git", "checkout", "--quiet", ref], source, log)
    print(f"librdkafka-tests: building librdkafka {ref} in {source} (log: {log})", flush=True)
    run(CONFIGURE, source, log)
    run(["make", "libs"], source, log)
    run(["make", "test-runner"], source / "tests", log)
    for old in cache.glob("built-*"):
        old.unlink()
    stamp.touch()
    return source / "tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_options() -> list[str]:
    """``regroup serve`` options matching the suite's broker, as far as this build of the server has them."""
    usage = subprocess.run(
        [sys.executable, "-m", "regroup", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    options: list[str] = []  # (the other defaults are Kafka's: a new group's first rebalance waits 3 s, as there)
    if "--num-partitions" in usage:
        options += ["--num-partitions", str(AUTO_CREATED_PARTITIONS)]
    else:
        print(
            "librdkafka-tests: this regroup serve has no --num-partitions: topics the tests create by using them "
            f"get 1 partition, not {AUTO_CREATED_PARTITIONS}, and the tests that expect more fail",
            file=sys.stderr,
        )
    return options


@contextlib.contextmanager
def regroup_serve(log: Path, options: list[str]) -> Iterator[int]:
    """A fresh ``regroup serve`` (its own data directory); yields its port, kills it afterwards."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="regroup-librdkafka-") as data:
        command = [sys.executable, "-m", "regroup", "serve", "--port", str(port), "--data-dir", data, *options]
        with log.open("ab") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"librdkafka-tests: regroup serve exited with {proc.returncode}; see {log}")
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"librdkafka-tests: regroup serve did not start; see {log}")
                time.sleep(0.05)
            yield port
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)


_FAILURE = re.compile(r"(TEST FAILURE|FAILED|Test assertion failed|[A-Za-z_]+ failed:).*")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_test(tests_dir: Path, test: str, protocol: str, timeout_s: float, results: Path, options: list[str]) -> Outcome:
    log = results / f"{test}.log"
    log.unlink(missing_ok=True)
    started = time.monotonic()
    with regroup_serve(results / f"{test}.server.log", options) as port:
        conf = results / f"{test}.conf"
        conf.write_text(f"metadata.broker.list=127.0.0.1:{port}\ntest.timeout.multiplier=2\n")
        env = os.environ | {
            "TESTS": test,
            "TEST_KAFKA_VERSION": KAFKA_VERSION,
            "TEST_CONSUMER_GROUP_PROTOCOL": protocol,
            "RDKAFKA_TEST_CONF": str(conf),
            "LD_LIBRARY_PATH": f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}",
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["./test-runner", "-E", "-L", "-p1"], cwd=tests_dir, env=env, stdout=out, stderr=subprocess.STDOUT
            )
            try:
                status = proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                status = None
    seconds = round(time.monotonic() - started, 1)
    text = _ANSI.sub("", log.read_text(errors="replace"))
    if status is None:
        return Outcome(test, protocol, "timeout", seconds, f"still running after {timeout_s:.0f} s")
    summary = [line for line in text.splitlines() if re.match(rf"\|\s*{test}\S*\s*\|", line.strip())]
    if status == 0:
        skipped = summary and all("SKIPPED" in line for line in summary)
        reason = _skip_reason(text) if skipped else ""
        return Outcome(test, protocol, "skipped" if skipped else "passed", seconds, reason)
    failure = next((m.group(0).strip() for m in map(_FAILURE.search, text.splitlines()) if m), "")
    return Outcome(test, protocol, "failed", seconds, failure[:300] or f"exit {status}")


def _skip_reason(text: str) -> str:
    for line in text.splitlines():
        if "SKIP" in line and ":" in line:
            return line.strip()[:200]
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/librdkafka/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", default=DEFAULT_TESTS, help="comma-separated test numbers")
    parser.add_argument("--protocol", choices=("classic", "consumer", "both"), default="both")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test")
    args = parser.parse_args(argv)
    if shutil.which("git") is None or shutil.which("make") is None:
        print("librdkafka-tests: needs git and make", file=sys.stderr)
        return 2
    cache = cache_dir()
    tests_dir = build(cache)
    options = serve_options()
    protocols = ("classic", "consumer") if args.protocol == "both" else (args.protocol,)
    outcomes: list[Outcome] = []
    for protocol in protocols:
        results = cache / "results" / protocol
        results.mkdir(parents=True, exist_ok=True)
        for test in [t.strip() for t in args.tests.split(",") if t.strip()]:
            outcome = run_test(tests_dir, test, protocol, args.timeout, results, options)
            outcomes.append(outcome)
            print(f"{outcome.test} {outcome.protocol:8} {outcome.result:8} {outcome.seconds:6.1f}s {outcome.reason}")
            sys.stdout.flush()
    summary = cache / "results" / "summary.json"
    summary.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    counts = {r: sum(o.result == r for o in outcomes) for r in ("passed", "failed", "skipped", "timeout")}
    print(" ".join(f"{n} {r}" for r, n in counts.items()) + f" (logs and {summary.name} in {summary.parent})")
    return 0 if counts["failed"] == counts["timeout"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

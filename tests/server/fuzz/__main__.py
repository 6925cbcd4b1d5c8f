"""``python -m tests.server.fuzz``: a fuzz run against a fresh ``regroup serve`` (``make fuzz``); exits 1 on
any finding. ``--sasl``: connection scripts through a SASL_PLAINTEXT listener (``sasl``); ``--tls``: through an
SSL listener (``tls``); ``--script N`` (with the run's ``--seed``) replays one script of those modes alone."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from tests.server.fuzz.runner import Options, describe, fuzz


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.server.fuzz", description=__doc__)
    parser.add_argument("--frames", type=int, default=1_000_000, help="frames to send (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed: the same seed sends the same frames")
    parser.add_argument("--connections", type=int, help="concurrent connections (default 8; --sasl, --tls: 32)")
    parser.add_argument("--window", type=int, default=Options.window, help="frames pipelined per connection")
    parser.add_argument("--batch", type=int, default=Options.batch, help="frames between two health checks")
    parser.add_argument("--findings", type=Path, default=Path("fuzz-findings.jsonl"), help="JSON lines, frames in hex")
    parser.add_argument("--rss-limit-mb", type=int, default=Options.rss_limit // 2**20, help="allowed RSS growth")
    parser.add_argument("--inode-limit", type=int, default=Options.inode_limit, help="allowed growth in files")
    parser.add_argument("--max-restarts", type=int, default=Options.max_restarts, help="after crashes or hangs")
    parser.add_argument("--stop-at-first", action="store_true", help="stop at the first crash or hang")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--sasl", action="store_true", help="SASL exchanges, mutated at every step")
    modes.add_argument("--tls", action="store_true", help="TLS records and handshakes, then mutated frames")
    parser.add_argument(
        "--script", type=_scripts, action="append", default=[], help="replay script N (or scripts N-M) of --seed"
    )
    args = parser.parse_args(argv)
    mode = "sasl" if args.sasl else "tls" if args.tls else "frames"
    if args.script and mode == "frames":
        parser.error("--script replays a script of --sasl or --tls")
    options = Options(
        frames=args.frames,
        seed=args.seed,
        connections=args.connections or (8 if mode == "frames" else 32),
        mode=mode,
        scripts=tuple(index for scripts in args.script for index in scripts),
        window=args.window,
        batch=args.batch,
        rss_limit=args.rss_limit_mb * 2**20,
        keep_going=not args.stop_at_first,
        max_restarts=args.max_restarts,
        inode_limit=args.inode_limit,
        findings_path=args.findings,
        progress_every=100_000 if mode == "frames" else 10_000,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out, as on Ctrl-C
    report = fuzz(options)
    for line in describe(report):
        print(line)
    if report.findings:
        print(f"fuzz: {report.findings} findings, frames written to {args.findings}")
        return 1
    args.findings.unlink(missing_ok=True)
    return 0


def _scripts(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


if __name__ == "__main__":
    sys.exit(main())

"""The fuzzer's parts, and a bounded fuzz run against a real ``regroup serve`` (``make fuzz`` runs a long one):
the seeds cover every API version served and encode exactly as the layout walker reads them, mutation is
reproducible from its seed, the log watcher recognises what the run must report, and 10,000 mutated frames
(``REGROUP_FUZZ_FRAMES``) neither crash, hang nor make the server log an error or grow without bound."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.fuzz.layout import walk
from tests.server.fuzz.mutate import Mutator
from tests.server.fuzz.runner import Options, describe, fuzz
from tests.server.fuzz.schema import served_requests, served_versions
from tests.server.fuzz.seeds import SIZE, corpus, make_seed
from tests.server.fuzz.values import entity_strategy
from tests.server.fuzz.watch import parse_records

VERSIONS = served_requests()
FRAMES = int(os.environ.get("REGROUP_FUZZ_FRAMES", "10000"))
SEED = int(os.environ.get("REGROUP_FUZZ_SEED", "20251126"))


def test_seeds_cover_every_served_api_version() -> None:
    seeds = corpus(random.Random(1), per_version=2)
    assert {(s.api_key, s.version) for s in seeds} == {(key, version) for key, version, _ in VERSIONS}
    assert len(VERSIONS) == sum(high - low + 1 for low, high in served_versions().values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_layout_reads_exactly_what_kio_wrote(data: st.DataObject) -> None:
    _, _, cls = data.draw(st.sampled_from(VERSIONS))
    body = data.draw(entity_strategy(cls, edge=True))
    seed = make_seed(cls, body)  # raises unless the walk ends exactly at the end of the frame
    for site in seed.sites:
        raw = seed.frame[site.offset : site.offset + site.width]
        if site.encoding == "i16":
            assert struct.unpack(">h", raw)[0] == site.value
        elif site.encoding == "i32":
            assert struct.unpack(">i", raw)[0] == site.value
    sites, end = walk(cls.__header_schema__, seed.frame, SIZE.size, header=True)
    assert sites[0].field == "client_id" and end <= len(seed.frame)


def test_mutation_is_reproducible_and_keeps_framing_honest() -> None:
    def frames(seed: int) -> list[tuple[bytes, str, bool]]:
        rng = random.Random(seed)
        mutator = Mutator(rng, corpus(rng, per_version=1), served_versions())
        return [(m.frame, m.how, m.last) for m in (mutator.next(i, i) for i in range(3000))]

    first = frames(5)
    assert first == frames(5) and first != frames(6)
    for frame, how, last in first:
        if not last:
            assert struct.unpack_from(">i", frame)[0] == len(frame) - 4, how
    kinds = {how.split("(")[0].split("@")[0].rstrip("0123456789") for _, how, _ in first}
    assert {"valid", "bitflip", "overwrite", "truncate", "length", "splice", "random"} <= kinds


LOG = b"""\
2026-01-01 10:00:00,000 INFO regroup.server serving host=127.0.0.1 port=9092
2026-01-01 10:00:01,000 INFO regroup.network.connection closing connection 3 from 127.0.0.1:5000: bad frame
2026-01-01 10:00:02,000 ERROR regroup.server.handlers api key 15 v0 from fz-0000002a failed
Traceback (most recent call last):
  File "/x/regroup/server/handlers/admin.py", line 52, in describe_groups
    group_ids = list(request.groups)
TypeError: 'NoneType' object is not iterable
memory allocation of 34359738352 bytes failed
stack backtrace:
   0: std::alloc::rust_oom
"""


def test_log_watcher_finds_errors_tracebacks_and_native_aborts() -> None:
    records = parse_records(LOG)
    assert [r.level for r in records] == ["INFO", "INFO", "ERROR", "STDERR"]
    assert [r.is_finding for r in records] == [False, False, True, False]
    error = records[2]
    assert error.tag == 42 and error.has_traceback
    assert error.signature() == (
        "ERROR regroup.server.handlers: api key 15 vN from * failed | TypeError: 'NoneType' object is not iterable"
        " | at admin.py:52 describe_groups"
    )
    assert records[3].signature() == "native: memory allocation of N bytes failed"


def test_bounded_fuzz_run(tmp_path: Path) -> None:
    findings = tmp_path / "findings.jsonl"
    lines: list[str] = []
    options = Options(frames=FRAMES, seed=SEED, keep_going=False, max_restarts=3, findings_path=findings)
    options.echo = lines.append
    report = fuzz(options, tmp_path / "run")
    summary = "\n".join([*lines, *describe(report), f"frames written to {findings}"])
    assert report.findings == 0, summary
    assert report.frames >= FRAMES, summary
    assert report.outcomes["answered"] > 0 and report.outcomes["closed"] > 0, summary

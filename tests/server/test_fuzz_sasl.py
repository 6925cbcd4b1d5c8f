"""The fuzzer's SASL and TLS modes (``tests/server/fuzz/sasl.py``, ``tls.py``): their scripts are reproducible
from the seed, the verdict each mutated token carries (must succeed, must fail) agrees with regroup's own
mechanisms in-process, and a short run of each mode (``REGROUP_FUZZ_SASL_FRAMES``, ``REGROUP_FUZZ_TLS_FRAMES``
frames) against a real ``regroup serve`` ends without a finding: no crash, hang, logged error or traceback,
memory growth, or wrong answer to an exchange."""

from __future__ import annotations

import base64
import os
import random
import time
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from regroup.security.oauthbearer import OAuthBearerServer, UnsecuredValidator
from regroup.security.plain import PlainServer
from regroup.security.sasl import Complete, Continue, Failed
from regroup.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential, ScramServer, credential_from_password
from tests.server.fuzz.runner import Options, Report, describe, fuzz
from tests.server.fuzz.sasl import (
    FAIL,
    OAUTH_SCOPE,
    OK,
    PLAIN_USERS,
    SCRAM_USERS,
    UNKNOWN,
    SaslScript,
    parse_server_first,
    split_client_first,
)
from tests.server.fuzz.schema import served_versions
from tests.server.fuzz.seeds import corpus
from tests.server.fuzz.tls import TlsScript

SASL_FRAMES = int(os.environ.get("REGROUP_FUZZ_SASL_FRAMES", "4000"))
TLS_FRAMES = int(os.environ.get("REGROUP_FUZZ_TLS_FRAMES", "2500"))
SEED = int(os.environ.get("REGROUP_FUZZ_SEED", "20251126"))
SCRAM = {"SCRAM-SHA-256": SCRAM_SHA_256, "SCRAM-SHA-512": SCRAM_SHA_512}


@cache
def stub_run(mode: str, seed: int) -> Any:
    """What a script reads of its run, without a server."""
    rng = random.Random(seed)
    seeds = corpus(rng, per_version=1)
    run = SimpleNamespace(mode=mode, options=Options(seed=seed), seeds=seeds, versions=served_versions())
    run.report, run.by_port = Report(), {}
    return run


@cache
def credential(mechanism: str, user: str) -> ScramCredential:
    return credential_from_password(SCRAM[mechanism], SCRAM_USERS[user], f"salt-{user}".encode(), 4096)


def agrees(verdict: str, step: object) -> bool:
    if verdict == UNKNOWN:
        return True
    return isinstance(step, Failed) == (verdict == FAIL)


def test_scripts_are_reproducible_from_the_seed() -> None:
    def draw(seed: int, index: int) -> tuple[Any, ...]:
        script = SaslScript(stub_run("sasl", seed), index)
        plan = script.rng.choices(range(len(script.PLANS)), [w for w, _ in script.PLANS])[0]
        plain = script.plain_token("fuzz", mutate=True)
        scram = script.scram_first("fuzz-scram", mutate=True)
        frames = [script.mutator.next(i, index).frame for i in range(5)]
        tls = TlsScript(stub_run("tls", seed), index)
        return plan, plain, scram, frames, tls.rng.random()

    first = [draw(7, index) for index in range(1, 40)]
    assert first == [draw(7, index) for index in range(1, 40)]
    assert first != [draw(8, index) for index in range(1, 40)]


def test_plain_verdicts_agree_with_the_mechanism() -> None:
    server_users = dict(PLAIN_USERS)
    seen = set()
    for index in range(400):
        script = SaslScript(stub_run("sasl", 3), index)
        token, how, verdict = script.plain_token(script.rng.choice(("fuzz", "other")), mutate=True)
        step = PlainServer(server_users).evaluate(token, 0)
        assert agrees(verdict, step), (how, verdict, step)
        seen.add(verdict)
    assert seen == {OK, FAIL, UNKNOWN}


@pytest.mark.parametrize("mechanism", sorted(SCRAM))
def test_scram_verdicts_agree_with_the_mechanism(mechanism: str) -> None:
    outcomes = set()
    for index in range(300):
        script = SaslScript(stub_run("sasl", 4), index)
        script.mechanism = mechanism
        user = script.rng.choice(sorted(SCRAM_USERS))
        first, how, first_verdict, impostor = script.scram_first(user, mutate=True)
        server = ScramServer(
            SCRAM[mechanism],
            lambda name: credential(mechanism, name) if name in SCRAM_USERS else None,
            lambda: "srv-nonce-0123",
        )
        step = server.evaluate(first, 0)
        assert agrees(first_verdict, step), (how, first_verdict, step)
        if not isinstance(step, Continue):
            continue
        gs2, bare, _ = split_client_first(first)
        final, final_how, final_verdict, signature = script.scram_final_message(
            SCRAM_USERS[user], impostor, gs2, bare, parse_server_first(step.challenge), mutate=True
        )
        step = server.evaluate(final, 0)
        verdict = UNKNOWN if first_verdict == UNKNOWN and final_verdict != FAIL else final_verdict
        assert agrees(verdict, step), (how, final_how, verdict, step)
        if isinstance(step, Complete) and signature is not None and verdict == OK:
            assert step.challenge == b"v=" + base64.b64encode(signature)
        outcomes.add(type(step).__name__)
    assert outcomes == {"Complete", "Failed"}


def test_oauthbearer_verdicts_agree_with_the_mechanism() -> None:
    seen = set()
    for index in range(400):
        script = SaslScript(stub_run("sasl", 5), index)
        message, how, verdict = script.oauth_initial("fuzz-oauth", mutate=True)
        step = OAuthBearerServer(UnsecuredValidator(required_scope=(OAUTH_SCOPE,))).evaluate(
            message, time.time_ns() // 1_000_000
        )
        assert agrees(verdict, step), (how, verdict, step)
        seen.add(verdict)
    assert seen == {OK, FAIL, UNKNOWN}


def run_mode(tmp_path: Path, mode: str, frames: int) -> Report:
    findings = tmp_path / "findings.jsonl"
    lines: list[str] = []
    options = Options(
        frames=frames, seed=SEED, connections=16, mode=mode, keep_going=False, max_restarts=3, findings_path=findings
    )
    options.echo = lines.append
    report = fuzz(options, tmp_path / "run")
    summary = "\n".join([*lines, *describe(report), f"frames written to {findings}"])
    assert report.findings == 0, summary
    assert report.frames >= frames, summary
    return report


def test_bounded_sasl_fuzz_run(tmp_path: Path) -> None:
    report = run_mode(tmp_path, "sasl", SASL_FRAMES)
    outcomes = report.outcomes
    assert outcomes["authenticated"] > 0 and outcomes["auth fail"] > 0 and outcomes["closed"] > 0, outcomes
    assert all(outcomes[f"plan {plan}"] > 0 for _, plan in SaslScript.PLANS), outcomes


def test_bounded_tls_fuzz_run(tmp_path: Path) -> None:
    report = run_mode(tmp_path, "tls", TLS_FRAMES)
    outcomes = report.outcomes
    assert outcomes["answered"] > 0 and outcomes["tls: closed by the server"] > 0, outcomes
    assert all(outcomes[f"plan {plan}"] > 0 for _, plan in TlsScript.PLANS), outcomes

"""librdkafka's own integration tests against ``regroup serve`` (``make librdkafka-tests``; not part of
``make test``).

Builds librdkafka and its test runner once in a cache directory outside the repository
(``$REGROUP_LIBRDKAFKA_CACHE``, default ``~/.cache/regroup/librdkafka``) from ``$LIBRDKAFKA_GIT`` (a git URL
or a local repository) at ``$LIBRDKAFKA_REF``, then runs each chosen test against a fresh ``regroup serve``
(free loopback port, temporary data directory), with ``group.protocol`` classic and, with
``--protocol consumer``, KIP-848's consumer protocol (the suite's ``TEST_CONSUMER_GROUP_PROTOCOL``). Each
test's output goes to ``<cache>/results/<protocol>/<test>.log``; the summary (one line per test: passed,
failed or skipped, seconds, the suite's first failure message) is printed and written as JSON next to the
logs.

    python tests/librdkafka/run.py [--protocol classic|consumer|both] [--tests 0018,0030,...] [--timeout 1200]
    python tests/librdkafka/run.py --security [--tests 0097,0142-producer,...]
    python tests/librdkafka/run.py --share [--tests 0170,0171,...]

Needs git, a C/C++ compiler and make (libssl-dev, zlib1g-dev and libzstd-dev for TLS, gzip and zstd,
optional; ``--security`` needs librdkafka built with libssl-dev, for TLS and SCRAM). The default tests are the
suite's consumer-group, offset and rebalance tests that use a real broker (the mock-cluster ones test librdkafka
alone, and the runner leaves them out: ``-L``). docs/compatibility.md records the results and why each failure fails.

``--share`` runs the suite's share-consumer tests (KIP-932, ``SHARE_TESTS``) with ``TEST_KAFKA_VERSION`` 4.2.0,
which they need.

``--security`` runs the suite's TLS, SASL, re-authentication and ACL tests instead (``SECURITY_CASES``; by
default under ``group.protocol`` classic only). Each case is one test (or the subtests of it whose name contains
a ``SUBTESTS`` string) against a ``regroup serve --config`` whose ``server.properties`` sets up what that test
expects of its broker: the listener (``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL`` or ``PLAINTEXT``), its SASL
mechanism and users (PLAIN's in the JAAS config, SCRAM's added to the data directory with ``regroup users add``
before the server starts), ``connections.max.reauth.ms``, the ACL authorizer. The case's ``test.conf`` holds
the client side (``security.protocol``, ``sasl.mechanisms``, ``sasl.username``/``sasl.password``, ``ssl.*``) as
the suite's own cluster tooling writes it, and its environment the ``SSL_*`` files the TLS test reads. The
certificates are made afresh for each run (tests/server/certs.py) under ``<cache>/results/security/certs``.
The tests that change ACLs with Kafka's ``kafka-acls.sh`` get a ``$KAFKA_PATH`` whose ``bin/kafka-acls.sh``
is this script (``--kafka-acls``: the ``--add``/``--remove`` of one ACL binding, as CreateAcls/DeleteAcls).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_GIT = "https://github.com/confluentinc/librdkafka.git"
DEFAULT_REF = "v2.15.0"
#: what the suite believes the broker is: it skips tests that need a newer Kafka, and runs the KIP-848
#: ones only from 4.0
KAFKA_VERSION = "4.0.0"
#: the share-consumer tests (KIP-932) that use a real broker; they need the suite to believe Kafka 4.2 or later
SHARE_TESTS = "0170,0171,0172,0173,0174,0175,0176,0177,0178,0179,0180,0181,0184,0185"
SHARE_KAFKA_VERSION = "4.2.0"
#: consumer groups, offsets, rebalances, subscriptions and partition changes, against a real broker
DEFAULT_TESTS = (
    "0018,0019,0026,0029,0030,0033,0040,0041,0042,0044,0045,0048,0050,0056,0069,0089,0091,0099,0102,"
    "0113,0118,0122,0125,0127,0130,0132,0137,0140"
)
#: zstd is built when libzstd-dev is installed (several share-consumer tests produce with it)
CONFIGURE = ["./configure", "--no-download", "--disable-gssapi", "--disable-curl"]
#: the suite's broker creates topics on first use with 4 partitions (its default scenario's num.partitions)
AUTO_CREATED_PARTITIONS = 4
START_TIMEOUT_S = 20.0
#: what runs before a server starts: (its data directory, its port)
Prepare = Callable[[Path, int], None]


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
    configured = hashlib.sha1(" ".join(CONFIGURE).encode()).hexdigest()[:8]  # a new configuration rebuilds
    stamp = cache / f"built-{ref}-{configured}"
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
def regroup_serve(log: Path, options: list[str], prepare: Prepare | None = None) -> Iterator[int]:
    """A fresh ``regroup serve`` (its own data directory; ``prepare(data directory, port)`` runs before it
    starts); yields its port, kills it afterwards."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="regroup-librdkafka-") as data:
        if prepare is not None:
            prepare(Path(data), port)
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


def run_test(
    tests_dir: Path,
    test: str,
    protocol: str,
    timeout_s: float,
    results: Path,
    options: list[str],
    env: dict[str, str] | None = None,
) -> Outcome:
    def conf(port: int) -> str:
        return f"metadata.broker.list=127.0.0.1:{port}\ntest.timeout.multiplier=2\n"

    return run_suite(tests_dir, test, test, protocol, timeout_s, results, options, conf, env or {})


def run_suite(
    tests_dir: Path,
    name: str,
    test: str,
    protocol: str,
    timeout_s: float,
    results: Path,
    options: list[str],
    conf: Callable[[int], str],
    env: dict[str, str],
    prepare: Prepare | None = None,
) -> Outcome:
    """Runs suite test ``test`` against a fresh ``regroup serve`` (``options``); its test.conf is ``conf(port)``,
    ``env`` adds to its environment; ``name`` names its logs and its outcome."""
    log, server_log = results / f"{name}.log", results / f"{name}.server.log"
    log.unlink(missing_ok=True)
    server_log.unlink(missing_ok=True)
    started = time.monotonic()
    with regroup_serve(server_log, options, prepare) as port:
        conf_file = results / f"{name}.conf"
        conf_file.write_text(conf(port))
        env = (
            os.environ
            | {
                "TESTS": test,
                "TEST_KAFKA_VERSION": KAFKA_VERSION,
                "TEST_CONSUMER_GROUP_PROTOCOL": protocol,
                "RDKAFKA_TEST_CONF": str(conf_file),
                "LD_LIBRARY_PATH": f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}",
            }
            | env
        )
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
        return Outcome(name, protocol, "timeout", seconds, f"still running after {timeout_s:.0f} s")
    summary = [line for line in text.splitlines() if re.match(rf"\|\s*{test}\S*\s*\|", line.strip())]
    if status == 0:
        skipped = summary and all("SKIPPED" in line for line in summary)
        reason = _skip_reason(text) if skipped else _subtests(text)
        return Outcome(name, protocol, "skipped" if skipped else "passed", seconds, reason)
    return Outcome(name, protocol, "failed", seconds, _failure(text)[:300] or f"exit {status}")


_FAILED_AT = re.compile(r'### Test "[^"]*" failed at (\S+?):?\(?\)? at .*###')


def _failure(text: str) -> str:
    """The suite's message for the first failure (the line after its "### Test ... failed at FILE:LINE" line),
    else the first line that looks like one."""
    lines = text.splitlines()
    for number, line in enumerate(lines[:-1]):
        if m := _FAILED_AT.search(line):
            return f"{lines[number + 1].strip()} ({m.group(1)})"
    return next((m.group(0).strip() for m in map(_FAILURE.search, lines) if m), "")


_SUBTEST_DONE = re.compile(r"\[ (\S+?):\d+(?:: [^\]]*?)?: (PASS|SKIP)")


def _subtests(text: str) -> str:
    """How many subtests passed and were skipped, if the test has subtests ("" if none ran)."""
    done = [m.group(2) for m in map(_SUBTEST_DONE.search, text.splitlines()) if m]
    if not done:
        return ""
    return f"subtests: {done.count('PASS')} passed, {done.count('SKIP')} skipped"


def report(outcome: Outcome) -> None:
    line = f"{outcome.test} {outcome.protocol:8} {outcome.result:8} {outcome.seconds:6.1f}s {outcome.reason}"
    print(line, flush=True)


def _skip_reason(text: str) -> str:
    for line in text.splitlines():
        if "SKIP" in line and ":" in line:
            return line.strip()[:200]
    return ""


# ------------------------------------------------------------------------------------------------- --security
REPOSITORY = Path(__file__).resolve().parents[2]
#: the suite's cluster tooling's default SASL user (PLAIN and SCRAM) and its OAUTHBEARER client settings
USER, PASSWORD = "testuser", "testpass"
OAUTH_CLIENT = (
    "enable.sasl.oauthbearer.unsecure.jwt=true",
    "sasl.oauthbearer.config=scope=requiredScope principal=admin",
)
#: the client key's password (ssl.key.password), also the PKCS#12 keystore's
KEY_PASSWORD = "librdkafka-key-pw"
#: connections.max.reauth.ms for 0142: each of its subtests runs a little longer than this
REAUTH_MS = 10_000
#: Kafka's ACL authorizer; with no ACL on a resource everyone may use it (the test user is no super user: the
#: subtests checking authorized operations expect its rights to shrink to what an ACL grants it)
AUTHORIZER = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found=true",
    "super.users=User:admin",
)


@dataclass(frozen=True)
class SecurityCase:
    name: str
    test: str
    #: the listener's security protocol, and the client's
    protocol: str
    mechanism: str = ""
    #: the suite's SUBTESTS (the subtests whose name contains it), "" for all
    subtests: str = ""
    #: ssl.client.auth of the TLS listener ("" for none)
    client_auth: str = ""
    broker: tuple[str, ...] = ()
    client: tuple[str, ...] = ()
    #: a $KAFKA_PATH whose bin/kafka-acls.sh adds and removes ACLs
    kafka_acls: bool = False


_REAUTH = (f"connections.max.reauth.ms={REAUTH_MS}",)
SECURITY_CASES = (
    # 0097: certificate verification both ways, keys and CAs from files, PEM strings, DER and PKCS#12 blobs
    SecurityCase("0097-ssl", "0097", "SSL", client_auth="required"),
    SecurityCase("0097-ssl-requested", "0097", "SSL", client_auth="requested"),
    SecurityCase("0097-sasl_ssl", "0097", "SASL_SSL", "PLAIN", client_auth="required"),
    # 0115, 0119: Produce and Fetch refused by ACLs added with kafka-acls.sh (they run on PLAINTEXT only)
    SecurityCase("0115", "0115", "PLAINTEXT", broker=AUTHORIZER, kafka_acls=True),
    SecurityCase("0119", "0119", "PLAINTEXT", broker=AUTHORIZER, kafka_acls=True),
    # 0135: wrong credentials, then sasl_set_credentials() with the right ones
    SecurityCase("0135-plain", "0135", "SASL_PLAINTEXT", "PLAIN", "do_test:"),
    SecurityCase("0135-scram", "0135", "SASL_PLAINTEXT", "SCRAM-SHA-512", "do_test:"),
    SecurityCase("0135-share", "0135", "SASL_PLAINTEXT", "PLAIN", "Share consumer"),
    # 0142: KIP-368 re-authentication while producing, consuming and in transactions (its main reads the broker's
    # connections.max.reauth.ms with DescribeConfigs); one subtest function per case, so one failure hides no other
    *(
        SecurityCase(f"0142-{name}", "0142", "SASL_PLAINTEXT", "PLAIN", f"do_test_{function}:", broker=_REAUTH)
        for name, function in (
            ("consumer", "consumer"),
            ("producer", "producer"),
            ("txn", "txn_producer"),
            ("reauth_failure", "reauth_failure"),
        )
    ),
    *(
        SecurityCase(f"0142-scram-{f}", "0142", "SASL_PLAINTEXT", "SCRAM-SHA-256", f"do_test_{f}:", broker=_REAUTH)
        for f in ("producer", "reauth_failure")
    ),
    SecurityCase("0142-oauthbearer", "0142", "SASL_PLAINTEXT", "OAUTHBEARER", "do_test_oauthbearer:", broker=_REAUTH),
    SecurityCase("0142-share", "0142", "SASL_PLAINTEXT", "PLAIN", "do_test_share_", broker=_REAUTH),
    # 0126: OAUTHBEARER/OIDC; without an identity provider (and a build without libcurl) only its checks run
    SecurityCase("0126", "0126", "SASL_PLAINTEXT", "OAUTHBEARER"),
    # 0081's ACL subtests: CreateAcls/DescribeAcls/DeleteAcls, authorized operations before and after an ACL
    # for the test user, SCRAM credentials administration
    SecurityCase("0081-acls", "0081", "SASL_PLAINTEXT", "PLAIN", "Acls", broker=AUTHORIZER),
    SecurityCase(
        "0081-authorized_operations", "0081", "SASL_PLAINTEXT", "PLAIN", "with authorized operations", broker=AUTHORIZER
    ),
    SecurityCase(
        "0081-group_authorized_operations", "0081", "SASL_PLAINTEXT", "PLAIN", "with_authorized_ops", broker=AUTHORIZER
    ),
    SecurityCase(
        "0081-scram_credentials", "0081", "SASL_PLAINTEXT", "SCRAM-SHA-512", "UserScramCredentials", broker=AUTHORIZER
    ),
)


@dataclass(frozen=True)
class Certificates:
    """The files of one run: the server's key store and the client's key and certificate in each form the TLS
    test reads, all from one CA (``SSL_all_cas_pem`` adds another, unused one)."""

    ca: Path
    keystore: Path
    client_cert: Path
    client_key: Path
    env: dict[str, str]


def make_certificates(directory: Path) -> Certificates:
    sys.path.insert(0, str(REPOSITORY))
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID
    from tests.server.certs import Authority

    shutil.rmtree(directory, ignore_errors=True)
    ca = Authority(directory, "librdkafka test CA")
    unused = Authority(directory / "unused", "librdkafka unused CA")
    server = ca.server()
    keystore = directory / "server.keystore.pem"
    keystore.write_text(server.key_pem + server.cert_pem)
    subject = [(NameOID.ORGANIZATION_NAME, "regroup"), (NameOID.COMMON_NAME, "librdkafka")]
    client = ca.issue("client", subject, key_password=KEY_PASSWORD)
    cert = x509.load_pem_x509_certificate(client.cert_pem.encode())
    key = serialization.load_pem_private_key(client.key_pem.encode(), KEY_PASSWORD.encode())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    files = {
        "SSL_ca_pem": ca.cert,
        "SSL_ca_der": directory / "ca.der",
        "SSL_all_cas_pem": directory / "all-cas.pem",
        "SSL_pub_pem": client.cert,
        "SSL_pub_der": directory / "client-pub.der",
        "SSL_priv_pem": client.key,
        "SSL_priv_der": directory / "client-priv.der",
        "SSL_pkcs": directory / "client.p12",
    }
    files["SSL_ca_der"].write_bytes(ca_cert.public_bytes(serialization.Encoding.DER))
    files["SSL_all_cas_pem"].write_text(ca.cert_pem + unused.cert_pem)
    files["SSL_pub_der"].write_bytes(cert.public_bytes(serialization.Encoding.DER))
    files["SSL_priv_der"].write_bytes(
        key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    encryption = serialization.BestAvailableEncryption(KEY_PASSWORD.encode())
    files["SSL_pkcs"].write_bytes(
        pkcs12.serialize_key_and_certificates(b"client", key, cert, [ca_cert], encryption)  # type: ignore[arg-type]
    )
    env = {name: str(path) for name, path in files.items()} | {"SSL_password": KEY_PASSWORD}
    return Certificates(ca.cert, keystore, client.cert, client.key, env)


def broker_properties(case: SecurityCase, port: int, certs: Certificates) -> str:
    listener = case.protocol.lower()
    lines = [
        f"listeners={case.protocol}://127.0.0.1:{port}",
        f"advertised.listeners={case.protocol}://localhost:{port}",
    ]
    if "SSL" in case.protocol:
        lines += [
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={certs.keystore}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={certs.ca}",
        ]
        if case.client_auth:  # unprefixed, as the suite's cluster sets it: Kafka ignores it on a SASL_SSL listener
            lines.append(f"ssl.client.auth={case.client_auth}")
    if case.mechanism:
        lines.append(f"sasl.enabled.mechanisms={case.mechanism}")
        if case.mechanism == "PLAIN":
            jaas = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{USER}="{PASSWORD}" user_admin="admin-secret";'
            )
            lines.append(f"listener.name.{listener}.plain.sasl.jaas.config={jaas}")
        elif case.mechanism == "OAUTHBEARER":
            jaas = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredValidatorRequiredScope="requiredScope";'
            )
            lines.append(f"listener.name.{listener}.oauthbearer.sasl.jaas.config={jaas}")
    return "\n".join([*lines, *case.broker]) + "\n"


def client_conf(case: SecurityCase, port: int, certs: Certificates) -> str:
    lines = [
        f"metadata.broker.list=localhost:{port}",
        "broker.address.family=v4",
        "test.timeout.multiplier=2",
        f"security.protocol={case.protocol}",
    ]
    if case.mechanism:
        lines.append(f"sasl.mechanisms={case.mechanism}")
        if case.mechanism == "OAUTHBEARER":
            lines += OAUTH_CLIENT
        else:
            lines += [f"sasl.username={USER}", f"sasl.password={PASSWORD}"]
    if "SSL" in case.protocol:
        lines += [
            f"ssl.ca.location={certs.ca}",
            f"ssl.certificate.location={certs.client_cert}",
            f"ssl.key.location={certs.client_key}",
            f"ssl.key.password={KEY_PASSWORD}",
        ]
    return "\n".join([*lines, *case.client]) + "\n"


def kafka_path(directory: Path) -> Path:
    """A ``$KAFKA_PATH`` whose ``bin/kafka-acls.sh`` runs ``--kafka-acls`` of this script."""
    script = directory / "bin" / "kafka-acls.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" --kafka-acls "$@"\n')
    script.chmod(0o755)
    return directory


def select_cases(selection: str | None) -> list[SecurityCase]:
    if not selection:
        return list(SECURITY_CASES)
    chosen: list[SecurityCase] = []
    for item in (t.strip() for t in selection.split(",") if t.strip()):
        matched = [c for c in SECURITY_CASES if item in (c.name, c.test)]
        if not matched:
            names = ", ".join(c.name for c in SECURITY_CASES)
            raise SystemExit(f"librdkafka-tests: no security case {item!r} (cases: {names})")
        chosen += [c for c in matched if c not in chosen]
    return chosen


def run_security(
    tests_dir: Path, cases: Sequence[SecurityCase], protocols: Sequence[str], timeout_s: float, results: Path
) -> list[Outcome]:
    config_h = tests_dir.parent / "config.h"
    if "#define WITH_SSL 1" not in config_h.read_text() or "#define WITH_SASL_SCRAM 1" not in config_h.read_text():
        raise SystemExit(
            f"librdkafka-tests: --security needs librdkafka built with OpenSSL (install libssl-dev, then remove "
            f"{tests_dir.parent} to rebuild)"
        )
    certs = make_certificates(results / "certs")
    options = serve_options()
    outcomes: list[Outcome] = []
    for protocol in protocols:
        directory = results / protocol
        directory.mkdir(parents=True, exist_ok=True)
        for case in cases:
            config = directory / f"{case.name}.server.properties"
            env = {"SUBTESTS": case.subtests} if case.subtests else {}
            if "SSL" in case.protocol:
                env |= certs.env | {"SSL_client_auth": case.client_auth or "none"}
            if case.kafka_acls:
                env["KAFKA_PATH"] = str(kafka_path(directory / "kafka"))

            def prepare(data: Path, port: int, case: SecurityCase = case, config: Path = config) -> None:
                config.write_text(broker_properties(case, port, certs))
                if case.mechanism.startswith("SCRAM"):  # the SCRAM user, added to the data directory
                    command = [sys.executable, "-m", "regroup", "users", "add", "--data-dir", str(data)]
                    command += ["--mechanism", case.mechanism, "--user", USER, "--password", PASSWORD]
                    subprocess.run(command, check=True, capture_output=True)

            def conf(port: int, case: SecurityCase = case) -> str:
                return client_conf(case, port, certs)

            options_for_case = [*options, "--config", str(config)]
            outcome = run_suite(
                tests_dir, case.name, case.test, protocol, timeout_s, directory, options_for_case, conf, env, prepare
            )
            outcomes.append(outcome)
            report(outcome)
    return outcomes


#: kafka-acls.sh's names of operations and resource types, as Kafka's wire codes
ACL_OPERATIONS = {
    "all": 2, "read": 3, "write": 4, "create": 5, "delete": 6, "alter": 7, "describe": 8, "clusteraction": 9,
    "describeconfigs": 10, "alterconfigs": 11, "idempotentwrite": 12,
}  # fmt: skip
ACL_RESOURCES = {"topic": 2, "group": 3, "cluster": 4, "transactional-id": 5}
ACL_DENY, ACL_ALLOW, ACL_LITERAL = 2, 3, 3
CREATE_ACLS, DELETE_ACLS = 30, 31


def kafka_acls(argv: list[str]) -> int:
    """What ``kafka-acls.sh --bootstrap-server H:P --add|--remove [--force] --allow-principal|--deny-principal P
    --operation OP... [--allow-host|--deny-host H] --topic|--group T | --cluster`` does, on a PLAINTEXT listener:
    one CreateAcls or DeleteAcls (literal pattern)."""
    parser = argparse.ArgumentParser(prog="kafka-acls.sh")
    parser.add_argument("--bootstrap-server", required=True)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--allow-principal", action="append", default=[])
    parser.add_argument("--deny-principal", action="append", default=[])
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--deny-host", action="append", default=[])
    parser.add_argument("--operation", action="append", default=[])
    parser.add_argument("--topic")
    parser.add_argument("--group")
    parser.add_argument("--transactional-id")
    parser.add_argument("--cluster", action="store_true")
    args = parser.parse_args(argv)
    resources = [
        (ACL_RESOURCES[kind], name)
        for kind, name in (("topic", args.topic), ("group", args.group), ("transactional-id", args.transactional_id))
        if name
    ] + ([(ACL_RESOURCES["cluster"], "kafka-cluster")] if args.cluster else [])
    bindings = [
        {
            "resource_type": resource_type,
            "resource_name": resource_name,
            "resource_pattern_type": ACL_LITERAL,
            "principal": principal,
            "host": host,
            "operation": ACL_OPERATIONS[operation.lower()],
            "permission_type": permission,
        }
        for permission, principals, hosts in (
            (ACL_ALLOW, args.allow_principal, args.allow_host or ["*"]),
            (ACL_DENY, args.deny_principal, args.deny_host or ["*"]),
        )
        for principal in principals
        for host in hosts
        for operation in args.operation or ["All"]
        for resource_type, resource_name in resources
    ]
    sys.path.insert(0, str(REPOSITORY))
    from tests.server.wire import WireClient

    port = int(args.bootstrap_server.split(",")[0].rsplit(":", 1)[1])
    with WireClient(port, client_id="kafka-acls", timeout=10.0) as client:
        if args.add:
            response = client.call(CREATE_ACLS, 3, creations=bindings)
            errors = [(r.error_code, r.error_message) for r in response.results if r.error_code]
        else:
            filters = [
                {
                    "resource_type_filter": b["resource_type"],
                    "resource_name_filter": b["resource_name"],
                    "pattern_type_filter": ACL_LITERAL,
                    "principal_filter": b["principal"],
                    "host_filter": b["host"],
                    "operation": b["operation"],
                    "permission_type": b["permission_type"],
                }
                for b in bindings
            ]
            response = client.call(DELETE_ACLS, 3, filters=filters)
            errors = [(r.error_code, r.error_message) for r in response.filter_results if r.error_code]
    verb = "Adding" if args.add else "Removing"
    for binding in bindings:
        print(f"{verb} ACL: {binding}")
    for code, message in errors:
        print(f"Error: {code!r} {message or ''}", file=sys.stderr)
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--kafka-acls"]:
        return kafka_acls(argv[1:])
    parser = argparse.ArgumentParser(prog="tests/librdkafka/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tests", help="comma-separated test numbers (with --security: case names or test numbers; default all)"
    )
    parser.add_argument(
        "--protocol", choices=("classic", "consumer", "both"), help="default: both, with --security classic"
    )
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per test (0113 takes about 11 minutes)")
    parser.add_argument("--security", action="store_true", help="the TLS, SASL, re-authentication and ACL tests")
    parser.add_argument("--share", action="store_true", help="the share-consumer tests (KIP-932), as Kafka 4.2")
    args = parser.parse_args(argv)
    if shutil.which("git") is None or shutil.which("make") is None:
        print("librdkafka-tests: needs git and make", file=sys.stderr)
        return 2
    protocol = args.protocol or ("classic" if args.security else "consumer" if args.share else "both")
    protocols = ("classic", "consumer") if protocol == "both" else (protocol,)
    cache = cache_dir()
    cases = select_cases(args.tests) if args.security else []
    tests_dir = build(cache)
    outcomes: list[Outcome] = []
    if args.security:
        results = cache / "results" / "security"
        outcomes = run_security(tests_dir, cases, protocols, args.timeout, results)
    elif args.share:
        results = cache / "results" / "share"
        results.mkdir(parents=True, exist_ok=True)
        # the suite's cluster lets a group lock records for as little as a second (0173 asks for 3 s)
        options = [*serve_options(), "--share-min-record-lock-duration-ms", "1000"]
        for test in [t.strip() for t in (args.tests or SHARE_TESTS).split(",") if t.strip()]:
            env = {"TEST_KAFKA_VERSION": SHARE_KAFKA_VERSION}
            outcome = run_test(tests_dir, test, protocols[0], args.timeout, results, options, env)
            outcomes.append(outcome)
            report(outcome)
    else:
        results = cache / "results"
        options = serve_options()
        for protocol in protocols:
            directory = results / protocol
            directory.mkdir(parents=True, exist_ok=True)
            for test in [t.strip() for t in (args.tests or DEFAULT_TESTS).split(",") if t.strip()]:
                outcome = run_test(tests_dir, test, protocol, args.timeout, directory, options)
                outcomes.append(outcome)
                report(outcome)
    summary = results / "summary.json"
    summary.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    counts = {r: sum(o.result == r for o in outcomes) for r in ("passed", "failed", "skipped", "timeout")}
    print(" ".join(f"{n} {r}" for r, n in counts.items()) + f" (logs and {summary.name} in {summary.parent})")
    return 0 if counts["failed"] == counts["timeout"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Kafka's own Java clients (``../shared/java``: kafka-clients 4.0) against a secured ``regroup serve``
(``java/SecurityChecks.java``), one server per scenario, configured with Kafka's ``server.properties`` names:

- SASL_SSL with PLAIN: a producer and a consumer group round trip; a wrong password or an unknown user is a
  SaslAuthenticationException from the producer, the consumer and the Admin client; with
  ``connections.max.reauth.ms`` short, a busy producer and consumer keep working for seconds while re-authenticating
  (KIP-368: the clients' own metrics count the re-authentications, none failed).
- SASL_SSL with SCRAM-SHA-512: a user seeded with ``regroup users add`` before start; the Admin client creates a
  second user (AlterUserScramCredentials), describes the users, the new user connects, and after its deletion it
  cannot.
- SASL_PLAINTEXT with OAUTHBEARER: the Java client's unsecured tokens against the server's unsecured validator with
  a required scope; a token without the scope, or expired, is refused; re-authentication with the token. Signed JWTs
  are not covered from Java: the client's JWT login needs jose4j, which the Java client used here is built without.
- ACLs with Kafka's StandardAuthorizer and a super user: the Admin client creates (LITERAL, the wildcard and
  PREFIXED, ALLOW and DENY), describes (ANY, MATCH, LITERAL, PREFIXED, by principal and permission) and deletes
  ACLs, which a second principal may not do; that principal's consumer is refused without ACLs
  (GroupAuthorizationException or TopicAuthorizationException), still refused the topic with the group's ACL only,
  reads once the topic's exists, is refused after a DENY, reads again once it is deleted, all with the same consumer.

Skipped where Kafka's Java client or a JDK is not installed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.java_tools import java_program
from tests.server.certs import Authority
from tests.server.conftest import ServerProcess, assert_clean_log, configured, free_port

pytestmark = pytest.mark.timeout(180)

SOURCE = Path(__file__).with_name("java") / "SecurityChecks.java"

ADMIN_PW, ALICE_PW, CAROL_PW, DAVE_PW = "admin-pw-3c9e", "alice-pw-b71d", "carol-pw-6a20", "dave-pw-e415"
SECRETS = (ADMIN_PW, ALICE_PW, CAROL_PW, DAVE_PW)
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'user_admin="{ADMIN_PW}" user_alice="{ALICE_PW}" user_bob="bob-pw";'
)
REAUTH_MS = 1500
RUN_MS = 5000


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs SecurityChecks (compiled once for the module)."""
    return java_program(SOURCE, tmp_path_factory.mktemp("java"))


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("ca"))


def run_checks(java: list[str], scenario: str, **options: str) -> dict[str, str]:
    """SecurityChecks' results for ``scenario``: check name -> result."""
    args = [f"{key.replace('_', '.')}={value}" for key, value in options.items()]
    done = subprocess.run(
        [*java, "SecurityChecks", scenario, *args], capture_output=True, text=True, timeout=150, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    return dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)


serve = configured


def stop(proc: ServerProcess) -> None:
    proc.kill()
    assert_clean_log(proc)
    log = proc.log()
    assert not [secret for secret in SECRETS if secret in log]


def tls_settings(directory: Path, authority: Authority) -> str:
    server = authority.server()
    keystore = directory / "keystore.pem"
    keystore.write_text(server.key_pem + server.cert_pem)
    return f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"


# ------------------------------------------------------------------------------------------ PLAIN over TLS


@pytest.fixture(scope="module")
def plain_results(
    tmp_path_factory: pytest.TempPathFactory, java: list[str], authority: Authority
) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("plain")
    port = free_port()
    proc = serve(
        base,
        f"listeners=SASL_SSL://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        f"connections.max.reauth.ms={REAUTH_MS}\n" + tls_settings(base, authority),
        port,
    )
    try:
        yield run_checks(
            java,
            "plain",
            bootstrap=f"127.0.0.1:{port}",
            protocol="SASL_SSL",
            mechanism="PLAIN",
            truststore=str(authority.cert),
            admin=ADMIN_PW,
            alice=ALICE_PW,
            topic="plain-orders",
            group="plain-group",
            run_ms=str(RUN_MS),
        )
    finally:
        stop(proc)


def test_plain_over_tls_round_trip(plain_results: dict[str, str]) -> None:
    assert plain_results["round-trip"] == "produced 5 consumed 5 in order", plain_results


@pytest.mark.parametrize(
    "check", ["wrong-password-producer", "wrong-password-consumer", "wrong-password-admin", "unknown-user"]
)
def test_plain_wrong_credentials_are_refused(plain_results: dict[str, str], check: str) -> None:
    assert plain_results[check] == "refused SaslAuthenticationException", plain_results


def test_java_clients_keep_working_across_reauthentication(plain_results: dict[str, str]) -> None:
    words = plain_results["reauthentication"].split()
    assert words[0::2] == ["sent", "received", "producer-reauth", "consumer-reauth", "failed"], plain_results
    sent, received, producer_reauth, consumer_reauth, failed = map(int, words[1::2])
    assert sent >= 10 and received == sent, plain_results
    # a session lasts 1.5 s, the clients re-authenticate at 85-95% of it: several times in 5 s
    assert producer_reauth >= 2 and consumer_reauth >= 2 and failed == 0, plain_results


# ------------------------------------------------------------------------------------------ SCRAM over TLS


@pytest.fixture(scope="module")
def scram_results(
    tmp_path_factory: pytest.TempPathFactory, java: list[str], authority: Authority
) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("scram")
    subprocess.run(
        [sys.executable, "-m", "regroup", "users", "add", "--data-dir", str(base / "data"),
         "--mechanism", "SCRAM-SHA-512", "--user", "carol", "--password", CAROL_PW],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    port = free_port()
    proc = serve(
        base,
        f"listeners=SASL_SSL://127.0.0.1:{port}\nsasl.enabled.mechanisms=SCRAM-SHA-512\n"
        + tls_settings(base, authority),
        port,
    )
    try:
        yield run_checks(
            java,
            "scram",
            bootstrap=f"127.0.0.1:{port}",
            protocol="SASL_SSL",
            mechanism="SCRAM-SHA-512",
            truststore=str(authority.cert),
            carol=CAROL_PW,
            dave=DAVE_PW,
            topic="scram-orders",
            group="scram-group",
        )
    finally:
        stop(proc)
    for path in (base / "data").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert CAROL_PW.encode() not in data and DAVE_PW.encode() not in data, path


def test_scram_user_seeded_before_start(scram_results: dict[str, str]) -> None:
    assert scram_results["round-trip"] == "produced 5 consumed 5 in order", scram_results
    assert scram_results["wrong-password"] == "refused SaslAuthenticationException", scram_results
    assert scram_results["carol-still"] == "ok 1 node", scram_results


def test_scram_user_created_and_deleted_with_the_admin_client(scram_results: dict[str, str]) -> None:
    r = scram_results
    assert r["dave-before"] == "refused SaslAuthenticationException", r
    assert r["upsert-dave"] == "ok", r
    assert r["described"] == "carol=SCRAM_SHA_512:4096 dave=SCRAM_SHA_512:8192", r
    assert r["describe-dave"] == "dave 1", r
    assert r["dave-connects"] == "ok 1 node", r
    assert r["dave-produces"] == "ok", r
    assert r["dave-wrong-password"] == "refused SaslAuthenticationException", r
    assert r["delete-dave"] == "ok", r
    assert r["described-after-delete"] == "carol=SCRAM_SHA_512:4096", r
    assert r["describe-dave-after-delete"] == "ResourceNotFoundException", r
    assert r["dave-after-delete"] == "refused SaslAuthenticationException", r


# ------------------------------------------------------------------------------------------ OAUTHBEARER


@pytest.fixture(scope="module")
def oauth_results(tmp_path_factory: pytest.TempPathFactory, java: list[str]) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("oauth")
    port = free_port()
    proc = serve(
        base,
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=OAUTHBEARER\n"
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="kafka";\n'
        f"connections.max.reauth.ms={REAUTH_MS}\n",
        port,
    )
    try:
        yield run_checks(
            java,
            "oauth",
            bootstrap=f"127.0.0.1:{port}",
            protocol="SASL_PLAINTEXT",
            mechanism="OAUTHBEARER",
            scope="kafka",
            topic="oauth-orders",
            group="oauth-group",
            run_ms="3000",
        )
    finally:
        stop(proc)


def test_oauthbearer_unsecured_token_round_trip(oauth_results: dict[str, str]) -> None:
    assert oauth_results["round-trip"] == "produced 5 consumed 5 in order", oauth_results


@pytest.mark.parametrize("check", ["without-scope", "other-scope", "expired"])
def test_oauthbearer_tokens_refused(oauth_results: dict[str, str], check: str) -> None:
    assert oauth_results[check] == "refused SaslAuthenticationException", oauth_results


def test_oauthbearer_reauthentication(oauth_results: dict[str, str]) -> None:
    words = oauth_results["reauthentication"].split()
    sent, received, producer_reauth, consumer_reauth, failed = map(int, words[1::2])
    assert sent >= 5 and received == sent, oauth_results
    assert producer_reauth >= 1 and consumer_reauth >= 1 and failed == 0, oauth_results


# ------------------------------------------------------------------------------------------ ACLs


TOPIC, GROUP = "acl-orders", "acl-readers"
BOB_WRITES = f"TOPIC:LITERAL:{TOPIC}:User:bob:*:WRITE:ALLOW"
BOB_DESCRIBES = "TOPIC:LITERAL:*:User:bob:*:DESCRIBE:ALLOW"
BOB_DENIED = "TOPIC:PREFIXED:acl-:User:bob:10.0.0.1:READ:DENY"
ALICE_GROUP = f"GROUP:LITERAL:{GROUP}:User:alice:*:READ:ALLOW"
ALICE_READS = "TOPIC:PREFIXED:acl-:User:alice:*:READ:ALLOW"
ALICE_DENIED = f"TOPIC:LITERAL:{TOPIC}:User:alice:*:READ:DENY"


def joined(*bindings: str) -> str:
    return " ".join(sorted(bindings))


@pytest.fixture(scope="module")
def acl_results(tmp_path_factory: pytest.TempPathFactory, java: list[str]) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("acls")
    port = free_port()
    proc = serve(
        base,
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n",
        port,
    )
    try:
        yield run_checks(
            java,
            "acls",
            bootstrap=f"127.0.0.1:{port}",
            protocol="SASL_PLAINTEXT",
            mechanism="PLAIN",
            admin=ADMIN_PW,
            alice=ALICE_PW,
            topic=TOPIC,
            group=GROUP,
        )
    finally:
        stop(proc)


def test_a_super_user_needs_no_acl(acl_results: dict[str, str]) -> None:
    assert acl_results["admin-round-trip"] == "produced 3 consumed 3 in order", acl_results


def test_acl_apis_need_the_cluster_acls(acl_results: dict[str, str]) -> None:
    assert acl_results["alice-describe-acls"] == "refused ClusterAuthorizationException", acl_results
    assert acl_results["alice-create-acls"] == "refused ClusterAuthorizationException", acl_results


def test_acls_created_described_and_deleted(acl_results: dict[str, str]) -> None:
    r = acl_results
    for check in ("create-bob-acls", "create-group-acl", "create-topic-acl", "create-deny"):
        assert r[check] == "ok", r
    everything = (BOB_WRITES, BOB_DESCRIBES, BOB_DENIED, ALICE_GROUP, ALICE_READS, ALICE_DENIED)
    assert r["describe-any"] == joined(*everything), r
    # MATCH: the topic's LITERAL bindings, the wildcard's and the PREFIXED ones that are a prefix of its name
    assert r["describe-match"] == joined(BOB_WRITES, BOB_DESCRIBES, BOB_DENIED, ALICE_READS, ALICE_DENIED), r
    assert r["describe-match-other"] == BOB_DESCRIBES, r
    assert r["describe-literal"] == joined(BOB_WRITES, ALICE_DENIED), r
    assert r["describe-prefixed"] == joined(BOB_DENIED, ALICE_READS), r
    assert r["describe-alice"] == joined(ALICE_GROUP, ALICE_READS, ALICE_DENIED), r
    assert r["describe-deny"] == joined(BOB_DENIED, ALICE_DENIED), r
    assert r["delete-deny"] == ALICE_DENIED, r
    assert r["delete-prefixed"] == joined(BOB_DENIED, ALICE_READS), r
    assert r["describe-any-after-delete"] == joined(BOB_WRITES, BOB_DESCRIBES, ALICE_GROUP), r


def test_a_principal_reads_only_what_the_acls_allow(acl_results: dict[str, str]) -> None:
    r = acl_results
    assert r["alice-produce"] == "refused TopicAuthorizationException", r
    # FindCoordinator needs DESCRIBE on the group, the topic's metadata DESCRIBE on the topic: either comes first
    assert r["alice-no-acl"] in ("refused GroupAuthorizationException", "refused TopicAuthorizationException"), r
    # the group's ACL lets it join; a GroupAuthorizationException answered to an earlier request may come first
    assert r["alice-group-only"] in (
        "refused TopicAuthorizationException",
        "refused GroupAuthorizationException,TopicAuthorizationException",
    ), r
    assert r["alice-allowed"].startswith("records 3"), r
    assert r["alice-denied"] == "refused TopicAuthorizationException", r
    assert r["alice-allowed-again"].startswith("records 1"), r
    assert r["alice-refused-after-delete"] == "refused TopicAuthorizationException", r

"""Real clients against a ``regroup serve`` secured by TLS, SASL and ACLs (``--config`` with Kafka's names): each
client over each listener type and mechanism it has, and each refused with a wrong password, an expired, badly
signed or wrongly addressed token, or an untrusted certificate.

One server for the module (``secured``), with these listeners (``StandardAuthorizer``,
``super.users=User:admin;User:alice``):

=============== ============== ==================================================================================
listener        protocol       authentication
=============== ============== ==================================================================================
SASL_SSL        SASL_SSL       PLAIN (``admin``), SCRAM-SHA-256/512 (``alice``, added with ``regroup users add``
                               before the start; ``dave``, added over the wire by a test)
SASL_PLAINTEXT  SASL_PLAINTEXT the same mechanisms and users
OAUTH           SASL_PLAINTEXT OAUTHBEARER, Kafka's unsecured tokens, scope ``kafka`` required
JWT             SASL_SSL       OAUTHBEARER, RS256 JWTs checked against a JWKS file, expected issuer and audience
JWT_KAFKA       SASL_SSL       the same, its audience given under Kafka's mechanism-prefixed name
                               (``listener.name.<l>.oauthbearer.sasl.oauthbearer.*``)
MTLS            SSL            client certificates required, ``CN`` mapped to the principal
REAUTH          SASL_SSL       SCRAM-SHA-512 with ``connections.max.reauth.ms=2000`` (KIP-368)
=============== ============== ==================================================================================

* confluent-kafka (librdkafka): a group round trip with every SASL mechanism over SASL_SSL and SASL_PLAINTEXT;
  OAUTHBEARER with librdkafka's built-in unsecured token and with signed JWTs from ``oauth_cb``; mutual TLS
  with the principal checked by ACLs; the AdminClient's ACL calls and SCRAM credential calls, after which a
  user created over the wire authenticates, is authorized by the ACLs created and refused once deleted;
  re-authentication every 2 s while producing and consuming, on the same connections.
* kafka-python (KafkaProducer, KafkaConsumer, KafkaAdminClient) and aiokafka (AIOKafkaProducer,
  AIOKafkaConsumer): a group round trip with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_SSL
  (``ssl_cafile`` / ``ssl_context``) and SASL_PLAINTEXT; signed JWTs through their token providers; mutual TLS.

The server logs at debug (the re-authentication test reads its ``authenticated as`` lines). At the end no
password or token appears in its log or in any file of its data directory.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.server.certs import Authority, Issued
from tests.server.conftest import ServerProcess, assert_clean_log, free_port

jwt = pytest.importorskip("jwt")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

ADMIN_PW = "admin-plain-pw-5b1c"  # PLAIN, in the JAAS config
ALICE_PW = "alice-scram-pw-2e9d"  # SCRAM, added before the start
DAVE_PW = "dave-scram-pw-8c4f"  # SCRAM, added over the wire
WRONG_PW = "wrong-pw-0a1b"
PASSWORDS = (ADMIN_PW, ALICE_PW, DAVE_PW, WRONG_PW)
#: every token the tests made (the server must never write one down)
TOKENS: list[str] = []

ISSUER, AUDIENCE, KID = "https://issuer.regroup.test", "regroup", "key-1"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: the user of each SASL mechanism: PLAIN's is in the JAAS config, SCRAM's in the credential store
USERS = {"PLAIN": ("admin", ADMIN_PW), "SCRAM-SHA-256": ("alice", ALICE_PW), "SCRAM-SHA-512": ("alice", ALICE_PW)}
LISTENERS = {
    "SASL_SSL": "SASL_SSL",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    "OAUTH": "SASL_PLAINTEXT",
    "JWT": "SASL_SSL",
    "JWT_KAFKA": "SASL_SSL",
    "MTLS": "SSL",
    "REAUTH": "SASL_SSL",
}
RECORDS = 5
REAUTH_MS = 2000
DEADLINE_S = 20.0


@dataclass
class Secured:
    proc: ServerProcess
    ports: dict[str, int]
    authority: Authority
    stranger: Authority  # an authority the server does not trust
    base: Path
    jwt_key: rsa.RSAPrivateKey  # its public half is in the server's JWKS file

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def ca(self) -> str:
        return str(self.authority.cert)

    def client(self, name: str) -> Issued:
        return self.authority.client(name)


def _jaas_plain() -> str:
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="{ADMIN_PW}";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("secured")
    authority = Authority(base / "ca")
    stranger = Authority(base / "stranger", "another CA")
    server_cert = authority.server()
    keystore = base / "keystore.pem"
    keystore.write_text(server_cert.key_pem + server_cert.cert_pem)
    jwt_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(jwt_key.public_key()))
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]}))
    data = base / "data"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        subprocess.run(
            [sys.executable, "-m", "regroup", "users", "add", "--data-dir", str(data), "--mechanism", mechanism,
             "--user", "alice", "--password", ALICE_PW],
            check=True, capture_output=True,
        )  # fmt: skip
    ports = {name: free_port() for name in LISTENERS}
    properties = "\n".join(
        [
            "listeners=" + ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "listener.security.protocol.map=" + ",".join(f"{n}:{p}" for n, p in LISTENERS.items()),
            f"ssl.keystore.location={keystore}",
            f"ssl.truststore.location={authority.cert}",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={_jaas_plain()}",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={_jaas_plain()}",
            # Kafka's unsecured tokens, a scope required
            "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
            "listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
            'OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";',
            # signed JWTs
            "listener.name.jwt.sasl.enabled.mechanisms=OAUTHBEARER",
            f"listener.name.jwt.sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}",
            f"listener.name.jwt.sasl.oauthbearer.expected.issuer={ISSUER}",
            f"listener.name.jwt.sasl.oauthbearer.expected.audience={AUDIENCE}",
            # the same with the audience under the mechanism-prefixed name Kafka's validator also reads
            # (OAuthBearerValidatorCallbackHandler's ConfigurationUtils looks up "oauthbearer.<name>" first)
            "listener.name.jwt_kafka.sasl.enabled.mechanisms=OAUTHBEARER",
            f"listener.name.jwt_kafka.sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}",
            f"listener.name.jwt_kafka.oauthbearer.sasl.oauthbearer.expected.audience={AUDIENCE}",
            # mutual TLS
            "listener.name.mtls.ssl.client.auth=required",
            "listener.name.mtls.ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
            # KIP-368
            "listener.name.reauth.sasl.enabled.mechanisms=SCRAM-SHA-512",
            f"listener.name.reauth.connections.max.reauth.ms={REAUTH_MS}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:alice",
            "",
        ]
    )
    config = base / "server.properties"
    config.write_text(properties)
    proc = ServerProcess(data, base / "server.log", ["--config", str(config), "--log-level", "debug"])
    proc.port = ports["SASL_SSL"]  # the first listener's
    proc.start()
    try:
        yield Secured(proc, ports, authority, stranger, base, jwt_key)
    finally:
        proc.kill()
    assert_clean_log(proc)
    log = proc.log()
    secrets = [*PASSWORDS, *TOKENS]
    files = [path for path in data.rglob("*") if path.is_file()]
    assert files
    for secret in secrets:
        assert secret not in log, f"a secret is in the server's log: {secret[:12]}..."
        for path in files:
            assert secret.encode() not in path.read_bytes(), path


# ------------------------------------------------------------------------------------------- tokens


def signed_token(key: rsa.RSAPrivateKey, *, kid: str = KID, **claims: Any) -> str:
    """An RS256 JWT for alice from ``ISSUER`` to ``AUDIENCE``, valid for an hour; ``claims`` override."""
    now = int(time.time())
    payload = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600, **claims}
    token = str(jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid}))
    TOKENS.append(token)
    return token


def unsecured_token(**claims: Any) -> str:
    """Kafka's unsecured JWS (``"alg":"none"``, no signature) for alice with scope ``kafka``."""
    now = int(time.time())
    payload = {"sub": "alice", "scope": "kafka", "iat": now, "exp": now + 3600, **claims}

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    token = f"{part({'alg': 'none'})}.{part(payload)}."
    TOKENS.append(token)
    return token


def other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def bad_tokens(secured: Secured) -> dict[str, str]:
    """Tokens the JWT listener must refuse: expired, signed by another key (same kid), for another audience,
    from another issuer, unsigned."""
    now = int(time.time())
    return {
        "expired": signed_token(secured.jwt_key, iat=now - 7200, exp=now - 3600),
        "wrong key": signed_token(other_key()),
        "wrong audience": signed_token(secured.jwt_key, aud="someone-else"),
        "wrong issuer": signed_token(secured.jwt_key, iss="https://elsewhere.test"),
        "unsigned": unsecured_token(),
    }


# ------------------------------------------------------------------------------------------- confluent-kafka


def rd_sasl(secured: Secured, listener: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    """librdkafka's settings for a SASL listener."""
    conf: dict[str, Any] = {
        "bootstrap.servers": secured.bootstrap(listener),
        "security.protocol": LISTENERS[listener],
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if LISTENERS[listener] == "SASL_SSL":
        conf["ssl.ca.location"] = secured.ca
    return conf


def rd_oauth(secured: Secured, listener: str, token: str) -> dict[str, Any]:
    """librdkafka's settings for OAUTHBEARER with ``token`` from ``oauth_cb`` (librdkafka is told it lasts an
    hour, whatever the token says: it would not send one it knows expired)."""

    def oauth_cb(config: Any) -> tuple[str, float]:
        return token, time.time() + 3600

    conf: dict[str, Any] = {
        "bootstrap.servers": secured.bootstrap(listener),
        "security.protocol": LISTENERS[listener],
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }
    if LISTENERS[listener] == "SASL_SSL":
        conf["ssl.ca.location"] = secured.ca
    return conf


def rd_mtls(secured: Secured, cert: Issued, ca: str | None = None) -> dict[str, Any]:
    return {
        "bootstrap.servers": secured.bootstrap("MTLS"),
        "security.protocol": "SSL",
        "ssl.ca.location": ca or secured.ca,
        "ssl.certificate.location": str(cert.cert),
        "ssl.key.location": str(cert.key),
    }


def rd_admin(conf: dict[str, Any]) -> tuple[Any, list[KafkaError]]:
    errors: list[KafkaError] = []
    return AdminClient({**conf, "error_cb": errors.append}), errors


def rd_refused(
    conf: dict[str, Any], codes: tuple[int, ...] = (KafkaError._AUTHENTICATION,), within_s: float = DEADLINE_S
) -> KafkaError:
    """The error a librdkafka client reports (error_cb) when the broker refuses it."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 2000,
                         "reconnect.backoff.max.ms": 2000})  # fmt: skip
    started = time.monotonic()
    while time.monotonic() < started + within_s:
        producer.poll(0.05)
        for error in errors:
            if error.code() in codes:
                return error
    raise AssertionError(f"no error of {codes} reported: {errors}")


def rd_create_topic(conf: dict[str, Any], topic: str, partitions: int = 1) -> None:
    admin, errors = rd_admin(conf)
    for future in admin.create_topics([NewTopic(topic, partitions)], operation_timeout=10).values():
        future.result(timeout=DEADLINE_S)
    assert not errors, errors


def rd_round_trip(conf: dict[str, Any], topic: str, group: str) -> None:
    """Produce RECORDS records (acks=all) and read them back through a consumer group, committing."""
    errors: list[KafkaError] = []
    failed: list[Any] = []
    producer = Producer({**conf, "acks": "all", "error_cb": errors.append})
    for i in range(RECORDS):
        producer.produce(topic, value=f"{topic}-{i}".encode(), on_delivery=lambda e, m: e and failed.append(e))
    assert producer.flush(DEADLINE_S) == 0
    assert not failed, failed
    consumer = Consumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
         "error_cb": errors.append}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
        assert values == [f"{topic}-{i}".encode() for i in range(RECORDS)]
        consumer.commit(asynchronous=False)
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset == RECORDS
    finally:
        consumer.close()
    assert not errors, errors


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_confluent_kafka_sasl_group_round_trip_and_wrong_password(
    secured: Secured, listener: str, mechanism: str
) -> None:
    user, password = USERS[mechanism]
    name = unique(f"rd-{listener}-{mechanism}".lower())
    rd_round_trip(rd_sasl(secured, listener, mechanism, user, password), name, name)
    error = rd_refused(rd_sasl(secured, listener, mechanism, user, WRONG_PW))
    assert "Authentication failed" in error.str()


def test_confluent_kafka_unsecured_oauthbearer(secured: Secured) -> None:
    """librdkafka's built-in unsecured JWT (``enable.sasl.oauthbearer.unsecure.jwt``); one without the scope the
    listener requires, and an expired one from ``oauth_cb``, are refused; so is a signed JWT there."""
    base = {"bootstrap.servers": secured.bootstrap("OAUTH"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True}  # fmt: skip
    topic = unique("rd-unsecured")
    rd_round_trip({**base, "sasl.oauthbearer.config": "principal=alice scope=kafka"}, topic, topic)
    error = rd_refused({**base, "sasl.oauthbearer.config": "principal=alice scope=other"})
    assert "scope" in error.str()
    now = int(time.time())
    expired = unsecured_token(iat=now - 7200, exp=now - 3600)
    assert "Expiration Time" in rd_refused(rd_oauth(secured, "OAUTH", expired)).str()
    rd_refused(rd_oauth(secured, "OAUTH", signed_token(secured.jwt_key)))


def test_confluent_kafka_signed_jwt_from_oauth_cb(secured: Secured) -> None:
    topic = unique("rd-jwt")
    rd_round_trip(rd_oauth(secured, "JWT", signed_token(secured.jwt_key)), topic, topic)
    for why, token in bad_tokens(secured).items():
        error = rd_refused(rd_oauth(secured, "JWT", token))
        assert "Authentication failed" in error.str(), (why, error)


def test_confluent_kafka_jwt_audience_under_kafkas_mechanism_prefixed_name(secured: Secured) -> None:
    admin, _ = rd_admin(rd_oauth(secured, "JWT_KAFKA", signed_token(secured.jwt_key)))
    assert admin.list_topics(timeout=10).brokers
    rd_refused(rd_oauth(secured, "JWT_KAFKA", signed_token(secured.jwt_key, aud="someone-else")), within_s=3)


def test_confluent_kafka_mutual_tls_principals_checked_by_acls(secured: Secured) -> None:
    """alice's certificate maps to User:alice (a super user): she creates a topic and produces; bob's maps to
    User:bob, who has no ACL: TOPIC_AUTHORIZATION_FAILED creating a topic, CLUSTER_AUTHORIZATION_FAILED
    describing ACLs. A certificate from another authority, or a server the client does not trust, fail."""
    topic = unique("rd-mtls")
    alice = rd_mtls(secured, secured.client("alice"))
    rd_create_topic(alice, topic)
    rd_round_trip(alice, topic, topic)
    admin, _ = rd_admin(rd_mtls(secured, secured.client("bob")))
    futures = admin.create_topics([NewTopic(unique("rd-bob"), 1)], operation_timeout=10)
    for future in futures.values():
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=DEADLINE_S)
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)  # fmt: skip
    [future] = admin.create_acls([binding], request_timeout=10).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (bob's DescribeAcls is answered CLUSTER_AUTHORIZATION_FAILED too, but librdkafka drops that response's
    # error code and reports an empty listing: rd_kafka_DescribeAclsResponse_parse)
    # a client certificate from an authority the server does not trust: the server closes the connection once
    # the handshake is done (TLS 1.3), which librdkafka reports as "SSL connection closed by peer"
    errors: list[KafkaError] = []
    mallory = Producer({**rd_mtls(secured, secured.stranger.client("mallory")), "error_cb": errors.append})
    with pytest.raises(KafkaException) as failed:
        mallory.list_topics(timeout=2)
    assert failed.value.args[0].code() == KafkaError._TRANSPORT
    mallory.poll(0)
    assert {e.code() for e in errors} <= {KafkaError._ALL_BROKERS_DOWN, KafkaError._SSL, KafkaError._TRANSPORT}
    # a server certificate the client does not trust
    error = rd_refused(rd_mtls(secured, secured.client("alice"), ca=str(secured.stranger.cert)), (KafkaError._SSL,))
    assert "certificate verify failed" in error.str()


def test_confluent_kafka_admin_acls_and_scram_users(secured: Secured) -> None:
    """alice (a super user) adds dave's SCRAM credentials with ``alter_user_scram_credentials``; dave then
    authenticates but may not write until alice creates ACLs for him (``create_acls``), which
    ``describe_acls`` lists and ``delete_acls`` removes; once a credential is deleted dave is refused with it."""
    alice = rd_sasl(secured, "SASL_SSL", "SCRAM-SHA-512", "alice", ALICE_PW)
    admin, errors = rd_admin(alice)
    topic, group = unique("rd-dave"), unique("dave-group")
    rd_create_topic(alice, topic)
    rd_create_topic(alice, f"{topic}-rt")
    upserts = [
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), DAVE_PW.encode()),
        UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), DAVE_PW.encode(), b"dave-salt"
        ),
    ]
    for upsert in upserts:  # (Kafka refuses two alterations of one user in one request: DUPLICATE_RESOURCE)
        [future] = admin.alter_user_scram_credentials([upsert]).values()
        assert future.result(timeout=DEADLINE_S) is None
    [described] = admin.describe_user_scram_credentials(["dave"]).values()
    infos = {(i.mechanism, i.iterations) for i in described.result(timeout=DEADLINE_S).scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)}

    dave = rd_sasl(secured, "SASL_SSL", "SCRAM-SHA-256", "dave", DAVE_PW)

    def dave_writes() -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        producer = Producer({**dave, "acks": "all", "message.timeout.ms": 10_000})
        producer.produce(topic, value=b"from dave", on_delivery=lambda e, m: outcome.append(e))
        producer.flush(DEADLINE_S)
        assert len(outcome) == 1
        return outcome[0]

    error = dave_writes()  # authenticated, not authorized
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error

    def binding(kind: Any, name: str, pattern: Any, operation: Any) -> Any:
        return AclBinding(kind, name, pattern, "User:dave", "*", operation, AclPermissionType.ALLOW)

    bindings = [
        binding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, AclOperation.WRITE),
        binding(ResourceType.TOPIC, f"{topic}-", ResourcePatternType.PREFIXED, AclOperation.ALL),
        binding(ResourceType.GROUP, "dave-", ResourcePatternType.PREFIXED, AclOperation.READ),
    ]
    for future in admin.create_acls(bindings, request_timeout=10).values():
        assert future.result(timeout=DEADLINE_S) is None
    daves = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:dave", None, AclOperation.ANY,
                             AclPermissionType.ANY)  # fmt: skip
    assert set(admin.describe_acls(daves).result(timeout=DEADLINE_S)) == set(bindings)
    assert dave_writes() is None
    rd_round_trip(dave, f"{topic}-rt", group)
    [deleted] = admin.delete_acls([daves], request_timeout=10).values()
    assert set(deleted.result(timeout=DEADLINE_S)) == set(bindings)
    assert admin.describe_acls(daves).result(timeout=DEADLINE_S) == []
    error = dave_writes()
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error

    # the SCRAM-SHA-256 credential deleted: refused with it, still in with SCRAM-SHA-512
    [future] = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]
    ).values()
    assert future.result(timeout=DEADLINE_S) is None
    rd_refused(dave)
    dave512, _ = rd_admin(rd_sasl(secured, "SASL_SSL", "SCRAM-SHA-512", "dave", DAVE_PW))
    assert dave512.list_topics(timeout=10).brokers
    [described] = admin.describe_user_scram_credentials(["dave"]).values()
    infos = {(i.mechanism, i.iterations) for i in described.result(timeout=DEADLINE_S).scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_512, 4096)}
    [future] = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]
    ).values()
    assert future.result(timeout=DEADLINE_S) is None
    [described] = admin.describe_user_scram_credentials(["dave"]).values()
    with pytest.raises(KafkaException) as unknown:
        described.result(timeout=DEADLINE_S)
    assert unknown.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    rd_refused(rd_sasl(secured, "SASL_SSL", "SCRAM-SHA-512", "dave", DAVE_PW))
    assert not errors, errors


def test_confluent_kafka_reauthenticates_on_the_same_connections(secured: Secured) -> None:
    """KIP-368: sessions last 2 s on the REAUTH listener; a producer and a group consumer keep working for
    about 6 s without an error, each connection re-authenticating several times instead of reconnecting."""
    conf = rd_sasl(secured, "REAUTH", "SCRAM-SHA-512", "alice", ALICE_PW)
    topic = unique("rd-reauth")
    rd_create_topic(conf, topic)
    gc.collect()  # clients of earlier tests caught in reference cycles go now, not during the run
    start = len(secured.proc.log())
    errors: list[KafkaError] = []
    failed: list[KafkaError] = []
    producer = Producer({**conf, "acks": "all", "linger.ms": 0, "error_cb": errors.append})
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest", "error_cb": errors.append,
                         "fetch.wait.max.ms": 100})  # fmt: skip
    consumer.subscribe([topic])
    sent, received = 0, []
    began = time.monotonic()
    try:
        while time.monotonic() - began < 3 * REAUTH_MS / 1000 + 0.5:
            producer.produce(topic, value=str(sent).encode(), on_delivery=lambda e, m: e and failed.append(e))
            sent += 1
            producer.poll(0)
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                received.append(int(message.value()))
        assert producer.flush(DEADLINE_S) == 0
        deadline = time.monotonic() + DEADLINE_S
        while len(received) < sent and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                received.append(int(message.value()))
    finally:
        consumer.close()
    del producer
    assert not errors, errors
    assert not failed, failed
    assert received == list(range(sent)), (len(received), sent)
    log = secured.proc.log()[start:]
    authentications: dict[str, int] = {}
    for connection in re.findall(r"connection (\d+) authenticated as User:alice", log):
        authentications[connection] = authentications.get(connection, 0) + 1
    # the producer's and the consumer's broker connections and the consumer's coordinator connection lived
    # through the run, re-authenticating every ~2 s (librdkafka starts at 85-95 % of the session lifetime);
    # the others are the bootstrap connections librdkafka drops once it knows the broker
    long_lived = {c for c, n in authentications.items() if n >= 3}
    assert len(long_lived) >= 2, authentications
    assert len(authentications) <= 8, authentications  # no reconnections
    assert "session expired" not in log
    assert "listener=REAUTH" not in log  # (in "authentication failed" lines)


# ------------------------------------------------------------------------------------------- kafka-python


def kp_sasl(secured: Secured, listener: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap_servers": secured.bootstrap(listener),
        "security_protocol": LISTENERS[listener],
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    if LISTENERS[listener] == "SASL_SSL":
        settings["ssl_cafile"] = secured.ca
    return settings


def kp_round_trip(settings: dict[str, Any], topic: str, group: str) -> None:
    """Create the topic (KafkaAdminClient), produce RECORDS records (acks=all), read them back through a
    consumer group and commit."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic as KafkaNewTopic

    admin = KafkaAdminClient(**settings)
    try:
        admin.create_topics([KafkaNewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**settings, acks="all")
    try:
        futures = [producer.send(topic, f"{topic}-{i}".encode()) for i in range(RECORDS)]
        for future in futures:
            future.get(timeout=DEADLINE_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, **settings, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                values.extend(r.value for r in records)
        assert values == [f"{topic}-{i}".encode() for i in range(RECORDS)]
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == RECORDS
    finally:
        consumer.close()


def server_refused(secured: Secured, since: int, listener: str, mechanism: str, expected: str | None = None) -> None:
    """The server's log shows, after offset ``since``, a refused authentication on ``listener`` (or
    ``expected``)."""
    expected = expected or f"authentication failed peer=127.0.0.1 listener={listener} mechanism={mechanism} "
    deadline = time.monotonic() + 5
    while expected not in secured.proc.log()[since:]:
        assert time.monotonic() < deadline, f"no {expected!r} in the server's log"
        time.sleep(0.05)


def kp_refused(secured: Secured, settings: dict[str, Any], listener: str) -> None:
    """kafka-python retries a refused bootstrap until ``bootstrap_timeout_ms``, then raises KafkaTimeoutError.
    (It does not always report the refusal as SaslAuthenticationFailedError: kafka-python 3.0.12's transport
    drops the bytes it read together with the end of the stream, and the broker, like Kafka's, closes the
    connection right after the failed SaslAuthenticate's response. The server's log shows why.)"""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    since = len(secured.proc.log())
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**settings, bootstrap_timeout_ms=1000)
    server_refused(secured, since, listener, settings["sasl_mechanism"])


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_kafka_python_sasl_group_round_trip_and_wrong_password(secured: Secured, listener: str, mechanism: str) -> None:
    pytest.importorskip("kafka")
    user, password = USERS[mechanism]
    name = unique(f"kp-{listener}-{mechanism}".lower())
    kp_round_trip(kp_sasl(secured, listener, mechanism, user, password), name, name)
    kp_refused(secured, kp_sasl(secured, listener, mechanism, user, WRONG_PW), listener)


def kp_token_provider(token: str) -> Any:
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider  # kafka-python 3
    except ImportError:  # pragma: no cover - kafka-python 2
        from kafka.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return token

    return Provider()


def kp_oauth(secured: Secured, token: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": secured.bootstrap("JWT"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": secured.ca,
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": kp_token_provider(token),
    }


def kp_mtls(secured: Secured, cert: Issued, ca: str | None = None) -> dict[str, Any]:
    return {
        "bootstrap_servers": secured.bootstrap("MTLS"),
        "security_protocol": "SSL",
        "ssl_cafile": ca or secured.ca,
        "ssl_certfile": str(cert.cert),
        "ssl_keyfile": str(cert.key),
    }


def test_kafka_python_signed_jwt(secured: Secured) -> None:
    pytest.importorskip("kafka")
    topic = unique("kp-jwt")
    kp_round_trip(kp_oauth(secured, signed_token(secured.jwt_key)), topic, topic)
    tokens = bad_tokens(secured)
    for why in ("expired", "wrong key", "wrong audience"):
        kp_refused(secured, kp_oauth(secured, tokens[why]), "JWT")


def test_kafka_python_mutual_tls(secured: Secured) -> None:
    """alice's certificate: a group round trip; bob's: his topic creation and his writes are refused by the
    authorizer; untrusted client or server certificates: no connection."""
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic as KafkaNewTopic

    topic = unique("kp-mtls")
    kp_round_trip(kp_mtls(secured, secured.client("alice")), topic, topic)
    bob = kp_mtls(secured, secured.client("bob"))
    admin = kafka.KafkaAdminClient(**bob)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            admin.create_topics([KafkaNewTopic(unique("kp-bob"), 1, 1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(**bob, max_block_ms=5000)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send(topic, b"from bob").get(timeout=DEADLINE_S)
    finally:
        producer.close(timeout=5)
    for settings in (
        kp_mtls(secured, secured.stranger.client("mallory")),
        kp_mtls(secured, secured.client("alice"), ca=str(secured.stranger.cert)),
    ):
        with pytest.raises(kafka.errors.KafkaTimeoutError):
            kafka.KafkaProducer(**settings, bootstrap_timeout_ms=1000)


# ------------------------------------------------------------------------------------------- aiokafka


def aio_sasl(secured: Secured, listener: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    settings: dict[str, Any] = {
        "bootstrap_servers": secured.bootstrap(listener),
        "security_protocol": LISTENERS[listener],
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    if LISTENERS[listener] == "SASL_SSL":
        settings["ssl_context"] = create_ssl_context(cafile=secured.ca)
    return settings


async def aio_round_trip(settings: dict[str, Any], topic: str, group: str) -> None:
    """Produce RECORDS records (acks=all; the topic is created on first use), read them back through a
    consumer group and commit."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(**settings, acks="all")
    await producer.start()
    try:
        for i in range(RECORDS):
            await producer.send_and_wait(topic, f"{topic}-{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, **settings, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                values.extend(r.value for r in records)
        assert values == [f"{topic}-{i}".encode() for i in range(RECORDS)]
        await consumer.commit()
        assert await consumer.committed(TopicPartition(topic, 0)) == RECORDS
    finally:
        await consumer.stop()


async def aio_refused(settings: dict[str, Any]) -> BaseException:
    """What ``AIOKafkaProducer.start()`` raises when the broker refuses the client."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**settings, request_timeout_ms=5000)
    try:
        await producer.start()
    except Exception as exc:
        return exc
    finally:
        await producer.stop()
    raise AssertionError("the producer started")


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_aiokafka_sasl_group_round_trip_and_wrong_password(secured: Secured, listener: str, mechanism: str) -> None:
    pytest.importorskip("aiokafka")
    from aiokafka.errors import KafkaConnectionError

    user, password = USERS[mechanism]
    name = unique(f"aio-{listener}-{mechanism}".lower())
    asyncio.run(aio_round_trip(aio_sasl(secured, listener, mechanism, user, password), name, name))
    since = len(secured.proc.log())
    error = asyncio.run(aio_refused(aio_sasl(secured, listener, mechanism, user, WRONG_PW)))
    assert isinstance(error, KafkaConnectionError), repr(error)
    server_refused(secured, since, listener, mechanism)


def aio_oauth(secured: Secured, token: str) -> dict[str, Any]:
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.helpers import create_ssl_context

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return token

    return {
        "bootstrap_servers": secured.bootstrap("JWT"),
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=secured.ca),
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
    }


def aio_mtls(secured: Secured, cert: Issued, ca: str | None = None) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    context = create_ssl_context(cafile=ca or secured.ca, certfile=str(cert.cert), keyfile=str(cert.key))
    return {"bootstrap_servers": secured.bootstrap("MTLS"), "security_protocol": "SSL", "ssl_context": context}


def test_aiokafka_signed_jwt(secured: Secured) -> None:
    pytest.importorskip("aiokafka")
    topic = unique("aio-jwt")
    asyncio.run(aio_round_trip(aio_oauth(secured, signed_token(secured.jwt_key)), topic, topic))
    tokens = bad_tokens(secured)
    for why in ("expired", "wrong key", "wrong audience"):
        since = len(secured.proc.log())
        asyncio.run(aio_refused(aio_oauth(secured, tokens[why])))
        # aiokafka 0.14 takes the broker's error challenge ({"status":"invalid_token"}) for success instead of
        # answering it with 0x01 (RFC 7628 3.2.2) and sends Metadata: the broker, like Kafka's, closes the
        # connection of a client that sends a request in the middle of its SASL exchange
        server_refused(secured, since, "JWT", "OAUTHBEARER", "request of API 3 during SASL authentication")


def test_aiokafka_mutual_tls(secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    """alice's certificate: a group round trip; bob's writes are refused by the authorizer; untrusted client
    or server certificates: no connection."""
    pytest.importorskip("aiokafka")
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    topic = unique("aio-mtls")
    asyncio.run(aio_round_trip(aio_mtls(secured, secured.client("alice")), topic, topic))

    async def bob_writes() -> None:
        producer = AIOKafkaProducer(**aio_mtls(secured, secured.client("bob")), request_timeout_ms=5000)
        await producer.start()
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                await producer.send_and_wait(topic, b"from bob")
        finally:
            await producer.stop()

    asyncio.run(bob_writes())
    asyncio.run(aio_refused(aio_mtls(secured, secured.stranger.client("mallory"))))
    caplog.clear()
    with caplog.at_level("ERROR", logger="aiokafka"):
        asyncio.run(aio_refused(aio_mtls(secured, secured.client("alice"), ca=str(secured.stranger.cert))))
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text, caplog.text  # (start() says only "Unable to bootstrap")

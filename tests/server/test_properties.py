"""``regroup serve --config``: Java's ``.properties`` format, Kafka's names mapped onto regroup's settings, flags
over the file, the broker's DescribeConfigs view of them, and the process reading a file end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from regroup.cli.main import _build_parser
from regroup.cli.serve import KAFKA_NAMES, ServeError, server_config
from regroup.network.listeners import SecurityProtocol
from regroup.server.app import ServerConfig
from regroup.server.broker_configs import broker_config_entries
from regroup.server.config_view import describe_broker
from regroup.server.properties import (
    FLAG_SETTINGS,
    PropertiesError,
    ServerSettings,
    load_properties,
    parse_properties,
    server_settings,
)
from regroup.storage.topic_config import ConfigSource
from tests.server.conftest import free_port, served

SECRET = "s3cr3t-VALUE"
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    f'password="{SECRET}" user_admin="{SECRET}" user_alice="alice-pw";'
)


def settings(text: str) -> ServerSettings:
    return server_settings(parse_properties(text))


def error(text: str) -> str:
    with pytest.raises(PropertiesError) as info:
        settings(text)
    message = str(info.value)
    assert "\n" not in message and SECRET not in message, message
    return message


# ------------------------------------------------------------------------------------------- the file format


def test_separators_whitespace_and_comments() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d\t=\t four  \n"
        "e\n"
        "f = = x\n"
        "g:=y\n"
        "h=value # not a comment\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "four  ",  # leading whitespace of a value dropped, trailing kept (Java's rule)
        "e": "",
        "f": "= x",
        "g": "=y",
        "h": "value # not a comment",
    }


def test_continuation_lines() -> None:
    text = "list = a, \\\n      b, \\\n\tc\nafter=1\n#comment \\\nnot.continued=2\n"
    assert parse_properties(text) == {"list": "a, b, c", "after": "1", "not.continued": "2"}
    # an even number of backslashes does not continue; a continued line may look like a comment
    assert parse_properties("k=a\\\\\nnext=1\n") == {"k": "a\\", "next": "1"}
    assert parse_properties("k=a\\\n# still k\n") == {"k": "a# still k"}
    assert parse_properties("k=last\\") == {"k": "last"}
    assert parse_properties("k=a\\\n\nnext=1") == {"k": "a", "next": "1"}


def test_escapes_line_endings_and_overrides() -> None:
    text = "tab=a\\tb\r\nnl=a\\nb\rkey\\ with\\ spaces\\=and\\:colon = v\\u0041\\\\\nu=\\uD83D\\uDE00\\z\nnl=again\n"
    assert parse_properties(text) == {
        "tab": "a\tb",
        "nl": "again",  # later keys override earlier ones
        "key with spaces=and:colon": "vA\\",
        "u": "\U0001f600z",
    }
    with pytest.raises(PropertiesError, match=r"line 2: malformed \\uxxxx encoding"):
        parse_properties("ok=1\nbad=\\u12G4\n")


def test_reading_files(tmp_path: Path) -> None:
    with pytest.raises(PropertiesError, match="cannot read") as info:
        load_properties(tmp_path / "missing.properties")
    assert "\n" not in str(info.value)
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("\ufeffname=caf\u00e9\n".encode())
    assert load_properties(utf8) == {"name": "caf\u00e9"}
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=caf\u00e9\n".encode("iso-8859-1"))
    assert load_properties(latin1) == {"name": "caf\u00e9"}


# ------------------------------------------------------------------------------------------- the mapping


FLAG_FILE = {
    "num.partitions": ("3", 3),
    "auto.create.topics.enable": ("FALSE", False),
    "message.max.bytes": ("2000", 2000),
    "socket.request.max.bytes": ("4000", 4000),
    "connections.max.idle.ms": ("1234", 1234),
    "max.connections": ("77", 77),
    "max.connections.per.ip": ("7", 7),
    "log.dirs": (" /var/lib/regroup ", "/var/lib/regroup"),
    "log.retention.check.interval.ms": ("5000", 5000),
    "group.initial.rebalance.delay.ms": ("0", 0),
    "group.consumer.heartbeat.interval.ms": ("1000", 1000),
    "group.consumer.session.timeout.ms": ("9000", 9000),
    "group.consumer.max.size": ("10", 10),
    "group.consumer.assignors": ("uniform , range", "uniform,range"),
    "group.consumer.migration.policy": ("Upgrade", "upgrade"),
    "group.consumer.assignor.offload.enable": ("False", False),
    "group.consumer.assignment.interval.ms": ("1000", 1000),
    "group.consumer.min.assignment.interval.ms": ("0", 0),
    "group.consumer.max.assignment.interval.ms": ("20000", 20000),
    "transaction.max.timeout.ms": ("60000", 60000),
    "transactional.id.expiration.ms": ("3600000", 3600000),
    "group.share.enable": ("false", False),
    "group.share.heartbeat.interval.ms": ("500", 500),
    "group.share.session.timeout.ms": ("6000", 6000),
    "group.share.max.size": ("7", 7),
    "group.share.record.lock.duration.ms": ("2000", 2000),
    "group.share.min.record.lock.duration.ms": ("1000", 1000),
    "group.share.max.record.lock.duration.ms": ("40000", 40000),
    "group.share.assignment.interval.ms": ("500", 500),
    "group.share.min.assignment.interval.ms": ("100", 100),
    "group.share.max.assignment.interval.ms": ("9000", 9000),
    "group.share.delivery.count.limit": ("3", 3),
    "group.share.partition.max.record.locks": ("100", 100),
    "group.share.max.share.sessions": ("9", 9),
}


def test_every_flag_setting_is_mapped_and_typed() -> None:
    assert set(FLAG_FILE) == set(FLAG_SETTINGS) == set(KAFKA_NAMES.values())
    got = settings("".join(f"{name}={raw}\n" for name, (raw, _) in FLAG_FILE.items()))
    assert got.flag_values == {name: value for name, (_, value) in FLAG_FILE.items()}
    assert got.warnings == () and set(FLAG_FILE) <= got.configured


def test_log_dir_segment_bytes_and_authorization() -> None:
    got = settings(
        "log.dir=/data\nlog.segment.bytes=1048576\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin; User:ops ;\nallow.everyone.if.no.acl.found=true\n"
    )
    assert got.flag_values == {"log.dirs": "/data"}
    assert got.fields == {
        "segment_bytes": 1048576,
        "authorizer": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super_users": frozenset({"User:admin", "User:ops"}),
        "allow_everyone_if_no_acl_found": True,
    }
    assert {"log.dir", "log.dirs", "super.users", "authorizer.class.name"} <= got.configured
    assert settings("log.dirs=/a\nlog.dir=/b\n").flag_values == {"log.dirs": "/a"}  # log.dirs wins, as in Kafka
    assert settings("authorizer.class.name=\n").fields == {"authorizer": None}
    assert settings("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n").fields["authorizer"]


def test_bad_values_name_the_setting_and_value() -> None:
    assert error("num.partitions=three\n") == "invalid value 'three' for num.partitions: not a number of type INT"
    assert error("num.partitions=0\n") == "invalid value '0' for num.partitions: must be at least 1"
    assert "not a number of type INT" in error("message.max.bytes=3000000000\n")
    assert "not a number of type INT" in error("max.connections=1_000\n")
    assert "true or false" in error("auto.create.topics.enable=yes\n")
    assert "bidirectional" in error("group.consumer.migration.policy=sideways\n")
    assert "exactly one directory" in error("log.dirs=/a,/b\n")
    assert "log.segment.bytes" in error("log.segment.bytes=10\n")
    assert "authorizer.class.name" in error("authorizer.class.name=com.example.Mine\n")
    assert "super.users" in error("super.users=admin\n")
    assert "ssl.client.auth" in error("ssl.client.auth=maybe\n")  # checked even when no listener uses it
    assert "node.id and broker.id" in error("node.id=0\nbroker.id=1\n")


def test_unsupported_names_are_one_warning_each_and_boilerplate_is_silent() -> None:
    got = settings(
        "num.partitions=2\nlog.flush.interval.messages=1\nzookeeper.connect=zk:2181\n"
        "process.roles=broker,controller\ncontroller.quorum.voters=1@localhost:9093\nnum.io.threads=8\n"
        "inter.broker.listener.name=PLAINTEXT\nsasl.mechanism.inter.broker.protocol=PLAIN\n"
        "offsets.topic.replication.factor=1\nlog.retention.hours=168\ndefault.replication.factor=3\n"
        "node.id=1\n"
    )
    assert sorted(got.warnings) == [
        "default.replication.factor: not supported (regroup always uses 1); ignored",
        "log.flush.interval.messages: not supported by regroup; ignored",
        "node.id: not supported (regroup is always node 0); ignored",
        "zookeeper.connect: not supported by regroup; ignored",
    ]
    assert got.configured == {"num.partitions"}


def test_kafkas_own_kraft_sample_file() -> None:
    text = (
        "process.roles=broker,controller\nnode.id=0\ncontroller.quorum.voters=1@localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ninter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,"
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n"
        "num.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\nlog.dirs=/tmp/kraft-combined-logs\n"
        "num.partitions=1\nnum.recovery.threads.per.data.dir=1\noffsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
        "log.retention.hours=168\nlog.segment.bytes=1073741824\nlog.retention.check.interval.ms=300000\n"
    )
    got = settings(text)
    assert got.warnings == ()
    [listener] = got.fields["listeners"]  # the controller listener is not opened
    assert (listener.name, listener.host, listener.port, listener.protocol) == (
        "PLAINTEXT",
        "0.0.0.0",
        9092,
        SecurityProtocol.PLAINTEXT,
    )
    assert (listener.advertised_host, listener.advertised_port) == ("localhost", 9092)


# ------------------------------------------------------------------------------------------- listeners


def test_listeners_names_protocols_and_addresses() -> None:
    got = settings(
        "listeners=client://127.0.0.1:0, internal://[::1]:9093 ,EXTERNAL://:9094\n"
        "listener.security.protocol.map=CLIENT:plaintext,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\n"
        "advertised.listeners=EXTERNAL://broker.example.com:19094,INTERNAL://:9093\n"
    )
    client, internal, external = got.fields["listeners"]
    assert (client.name, client.host, client.port, client.advertised_host) == ("CLIENT", "127.0.0.1", 0, None)
    assert (internal.name, internal.host, internal.port, internal.advertised_host) == ("INTERNAL", "::1", 9093, None)
    assert (external.host, external.advertised_host, external.advertised_port) == (
        "0.0.0.0",
        "broker.example.com",
        19094,
    )
    # one IPv4 and one IPv6 listener may share a port; port 0 may repeat
    settings("listeners=A://127.0.0.1:9092,B://[::1]:9092,C://:0,D://:0\nlistener.security.protocol.map=A:PLAINTEXT,"
             "B:PLAINTEXT,C:PLAINTEXT,D:PLAINTEXT\n")  # fmt: skip


def test_bad_listeners() -> None:
    assert "no security protocol defined for listener CLIENT" in error("listeners=CLIENT://:9092\n")
    assert "cannot parse" in error("listeners=PLAINTEXT:9092\n")
    assert "different name" in error("listeners=PLAINTEXT://:9092,plaintext://:9093\n")
    assert "share a port" in error("listeners=PLAINTEXT://:9092,SSL://:9092\nssl.keystore.location=/k.pem\n")
    assert "outside 0..65535" in error("listeners=PLAINTEXT://:70000\n")
    assert "invalid security protocol" in error("listeners=A://:1\nlistener.security.protocol.map=A:TLS\n")
    assert "not one of the listeners" in error("listeners=PLAINTEXT://:9092\nadvertised.listeners=SSL://h:9093\n")
    assert "0.0.0.0" in error("listeners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://0.0.0.0:9092\n")


def test_tls_settings_and_listener_prefixed_overrides() -> None:
    got = settings(
        "listeners=SSL://:9093,INTERNAL://:9094\nlistener.security.protocol.map=SSL:SSL,INTERNAL:SSL\n"
        "ssl.keystore.location=/etc/regroup/server.pem\nssl.key.password=" + SECRET + "\n"
        "ssl.truststore.location=/etc/regroup/ca.pem\nssl.truststore.password=ignored\n"
        "ssl.client.auth=required\nssl.enabled.protocols=TLSv1.3\n"
        "ssl.cipher.suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
        "ssl.principal.mapping.rules=RULE:^CN=(.*?),.*$/$1/L,DEFAULT\nssl.endpoint.identification.algorithm=https\n"
        "listener.name.internal.ssl.keystore.location=/etc/regroup/internal.p12\n"
        "listener.name.internal.ssl.keystore.password=" + SECRET + "\n"
        "listener.name.internal.ssl.client.auth=none\n"
    )
    ssl_listener, internal = got.fields["listeners"]
    assert ssl_listener.tls is not None and internal.tls is not None
    assert (ssl_listener.tls.keystore_type, ssl_listener.tls.keystore_location) == (
        "PEM",
        Path("/etc/regroup/server.pem"),
    )
    assert ssl_listener.tls.key_password == SECRET and ssl_listener.tls.client_auth == "required"
    assert ssl_listener.tls.enabled_protocols == ("TLSv1.3",)
    assert ssl_listener.tls.cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",)
    assert ssl_listener.tls.principal_mapping_rules == "RULE:^CN=(.*?),.*$/$1/L,DEFAULT"
    assert (internal.tls.keystore_type, internal.tls.keystore_password, internal.tls.client_auth) == (
        "PKCS12",
        SECRET,
        "none",
    )
    assert internal.tls.truststore_location == Path("/etc/regroup/ca.pem")  # the global value behind it
    assert got.warnings == ()
    assert "listener.name.internal.ssl.client.auth" in got.configured


def test_pem_text_key_store() -> None:
    got = settings(
        "listeners=SSL://:9093\nssl.keystore.type=PEM\n"
        "ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- \\\n  MIIB -----END CERTIFICATE-----\n"
        "ssl.keystore.key=-----BEGIN PRIVATE KEY----- MIIE -----END PRIVATE KEY-----\n"
    )
    [listener] = got.fields["listeners"]
    assert listener.tls is not None and listener.tls.key_pem is not None
    assert listener.tls.certificate_chain_pem == "-----BEGIN CERTIFICATE----- MIIB -----END CERTIFICATE-----"


def test_bad_tls_settings_never_show_secrets() -> None:
    assert "needs a key store" in error("listeners=SSL://:9093\n")
    assert "PEM key store" in error(
        f"listeners=SSL://:9093\nssl.keystore.location=/k.pem\nssl.keystore.password={SECRET}\n"
    )
    assert "needs ssl.keystore.password" in error("listeners=SSL://:9093\nssl.keystore.location=/k.p12\n")
    assert "JKS" in error("listeners=SSL://:9093\nssl.keystore.type=JKS\nssl.keystore.location=/k.jks\n")
    assert "without ssl.keystore.certificate.chain" in error(f"listeners=SSL://:9093\nssl.keystore.key={SECRET}\n")
    assert "needs a trust store" in error(
        "listeners=SSL://:9093\nssl.keystore.location=/k.pem\nssl.client.auth=required\n"
    )
    assert "TLSv1.2 and TLSv1.3" in error(
        "listeners=SSL://:9093\nssl.keystore.location=/k.pem\nssl.enabled.protocols=TLSv1\n"
    )
    assert "Invalid rule" in error(
        "listeners=SSL://:9093\nssl.keystore.location=/k.pem\nssl.principal.mapping.rules=RULE:broken\n"
    )
    message = error(f"listener.name.ssl.ssl.client.auth=sometimes\nlisteners=SSL://:9093\nssl.key.password={SECRET}\n")
    assert message.startswith("invalid value 'sometimes' for listener.name.ssl.ssl.client.auth")


def test_sasl_ssl_takes_only_a_listener_prefixed_client_auth() -> None:
    base = "listeners=SASL_SSL://:9094\nssl.keystore.location=/k.pem\nssl.truststore.location=/ca.pem\n"
    base += f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}\n"
    got = settings(base + "ssl.client.auth=required\n")
    [listener] = got.fields["listeners"]
    assert listener.tls is not None and listener.tls.client_auth == "none"
    assert len(got.warnings) == 1 and "ssl.client.auth" in got.warnings[0]
    [listener] = settings(base + "listener.name.sasl_ssl.ssl.client.auth=requested\n").fields["listeners"]
    assert listener.tls is not None and listener.tls.client_auth == "requested"


def test_sasl_mechanisms_users_and_reauthentication() -> None:
    got = settings(
        "listeners=SASL_PLAINTEXT://:9092,SASL_SSL://:9093\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\nconnections.max.reauth.ms=60000\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256\n"
        "listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms=-1\n"
        "ssl.keystore.location=/k.pem\n"
    )
    plain, scram = got.fields["listeners"]
    assert plain.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512") and plain.max_reauth_ms == 60000
    assert dict(plain.plain_users) == {"admin": SECRET, "alice": "alice-pw"}
    assert scram.sasl_mechanisms == ("SCRAM-SHA-256",) and scram.max_reauth_ms == 0 and not scram.plain_users
    assert got.warnings == ()
    # PLAIN is the default mechanism, and needs users
    jaas = f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
    [listener] = settings(f"listeners=SASL_PLAINTEXT://:9092\n{jaas}").fields["listeners"]
    assert listener.sasl_mechanisms == ("PLAIN",)


def test_bad_sasl_settings_never_show_secrets() -> None:
    assert "names no user" in error("listeners=SASL_PLAINTEXT://:9092\n")
    assert "GSSAPI is not supported" in error("listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=GSSAPI\n")
    message = error(
        "listeners=SASL_PLAINTEXT://:9092\n"
        f'listener.name.sasl_plaintext.plain.sasl.jaas.config=PlainLoginModule required user_a="{SECRET}"\n'
    )
    assert message.startswith("invalid value (hidden) for listener.name.sasl_plaintext.plain.sasl.jaas.config")
    assert "one connections.max.reauth.ms per listener" in error(
        "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=SCRAM-SHA-256,OAUTHBEARER\n"
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms=1000\n"
    )


def test_sasl_jaas_config_without_prefix_is_a_warning() -> None:
    got = settings(f"sasl.jaas.config={PLAIN_JAAS}\nlisteners=PLAINTEXT://:9092\n")
    assert got.warnings == (
        "sasl.jaas.config: a broker's JAAS config must be prefixed with listener.name.<listener>.<mechanism>.; ignored",
    )
    got = settings("listeners=PLAINTEXT://:9092\nlistener.name.other.ssl.keystore.location=/x\n")
    assert len(got.warnings) == 1 and got.warnings[0].startswith("listener.name.other.ssl.keystore.location: ")


def test_oauthbearer_settings(tmp_path: Path) -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="read write" unsecuredValidatorAllowableClockSkewMs="3000" '
        'unsecuredValidatorPrincipalClaimName="client_id" unsecuredValidatorScopeClaimName="scp";'
    )
    got = settings(
        "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=OAUTHBEARER\n"
        f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={jaas}\n"
    )
    [listener] = got.fields["listeners"]
    oauth = listener.oauth
    assert oauth.jwks_path is None and oauth.unsecured_required_scope == ("read", "write")
    assert (oauth.unsecured_clock_skew_ms, oauth.unsecured_principal_claim, oauth.unsecured_scope_claim) == (
        3000,
        "client_id",
        "scp",
    )
    jwks = tmp_path / "jwks.json"
    got = settings(
        "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=OAUTHBEARER\n"
        f"sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}\nsasl.oauthbearer.expected.issuer=https://idp\n"
        "sasl.oauthbearer.expected.audience=kafka, regroup\nsasl.oauthbearer.clock.skew.seconds=5\n"
        "sasl.oauthbearer.sub.claim.name=azp\nsasl.oauthbearer.scope.claim.name=scp\n"
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n"
    )
    [listener] = got.fields["listeners"]
    oauth = listener.oauth
    assert (oauth.jwks_path, oauth.expected_issuer, oauth.expected_audience) == (
        jwks,
        "https://idp",
        ("kafka", "regroup"),
    )
    assert (oauth.clock_skew_s, oauth.sub_claim, oauth.scope_claim) == (5, "azp", "scp")
    assert got.warnings == ()
    assert "only file: URLs" in error(
        "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=OAUTHBEARER\n"
        "sasl.oauthbearer.jwks.endpoint.url=https://idp/keys\n"
    )


# ------------------------------------------------------------------------------------------- flags over the file


def config_of(tmp_path: Path, text: str, *flags: str) -> tuple[ServerConfig, tuple[str, ...]]:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return server_config(_build_parser().parse_args(["serve", "--config", str(path), *flags]))


def test_flags_override_the_file(tmp_path: Path) -> None:
    text = "num.partitions=3\nmessage.max.bytes=5000\nauto.create.topics.enable=false\nlog.dirs=/from/file\nfoo=1\n"
    config, warnings = config_of(tmp_path, text, "--num-partitions", "5", "--auto-create-topics")
    assert (config.default_partitions, config.message_max_bytes, config.auto_create_topics) == (5, 5000, True)
    assert config.data_dir == Path("/from/file") and warnings == (f"{tmp_path / 'server.properties'}: foo: not "
                                                                  "supported by regroup; ignored",)  # fmt: skip
    assert {"num.partitions", "message.max.bytes", "auto.create.topics.enable", "log.dirs"} <= config.configured
    assert config.listeners == () and (config.host, config.port) == ("127.0.0.1", 9092)
    assert "listeners" not in config.configured


def test_without_a_file_nothing_changes() -> None:
    config, warnings = server_config(_build_parser().parse_args(["serve"]))
    assert warnings == () and config.listeners == () and config.authorizer is None
    assert (config.host, config.port, config.configured) == ("127.0.0.1", 9092, frozenset())
    config, _ = server_config(_build_parser().parse_args(["serve", "--port", "0", "--num-partitions", "1"]))
    assert config.configured == {"listeners", "num.partitions"}


def test_host_and_port_flags_replace_the_first_listener(tmp_path: Path) -> None:
    text = "listeners=PLAINTEXT://10.0.0.1:9092,OTHER://:9093\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT\n"
    config, _ = config_of(tmp_path, text)
    assert (config.host, config.port) == ("10.0.0.1", 9092)
    config, _ = config_of(tmp_path, text, "--port", "0", "--advertised-host", "proxy")
    first, other = config.listeners
    assert (first.host, first.port, first.advertised_host) == ("10.0.0.1", 0, "proxy")
    assert (config.host, config.port, config.advertised_host) == ("10.0.0.1", 0, "proxy")
    assert (other.host, other.port) == ("0.0.0.0", 9093)


def test_file_values_keep_the_flags_checks(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match=r"^group.consumer.heartbeat.interval.ms \(9000\) must be less than "):
        config_of(tmp_path, "group.consumer.heartbeat.interval.ms=9000\ngroup.consumer.session.timeout.ms=9000\n")
    with pytest.raises(ServeError, match=r"^group.consumer.assignors 'sticky'"):
        config_of(tmp_path, "group.consumer.assignors=sticky\n")
    with pytest.raises(ServeError, match=r"^message.max.bytes \(200\) must not exceed --max-frame-bytes"):
        config_of(tmp_path, "message.max.bytes=200\n", "--max-frame-bytes", "100")
    with pytest.raises(ServeError, match=r"server.properties: invalid value 'x' for num.partitions"):
        config_of(tmp_path, "num.partitions=x\n")
    with pytest.raises(ServeError, match=r"^cannot read"):
        server_config(_build_parser().parse_args(["serve", "--config", str(tmp_path / "none")]))


# ------------------------------------------------------------------------------------------- DescribeConfigs


def test_broker_entries_show_sources_and_hide_secrets(tmp_path: Path) -> None:
    text = (
        "num.partitions=1\nlisteners=SASL_SSL://:9094\nssl.keystore.location=/k.pem\n"
        f"ssl.key.password={SECRET}\nsuper.users=User:admin\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}\n"
    )
    config, _ = config_of(tmp_path, text)
    entries = broker_config_entries(config)
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == (
        "1",
        ConfigSource.STATIC_BROKER_CONFIG,  # set by the file, though to the default value
    )
    assert entries["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["listeners"].value == "SASL_SSL://0.0.0.0:9094"
    assert entries["listener.security.protocol.map"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["sasl.enabled.mechanisms"].value == "PLAIN"
    assert entries["ssl.keystore.location"].value == "/k.pem"
    assert entries["super.users"].value == "User:admin"
    assert entries["authorizer.class.name"].source == ConfigSource.STATIC_BROKER_CONFIG
    described = {d.name: d for d in describe_broker(entries)}
    for name in ("ssl.key.password", "listener.name.sasl_ssl.plain.sasl.jaas.config", "ssl.keystore.password"):
        assert described[name].sensitive and described[name].value is None, name
        assert described[name].synonyms[0][1] is None
    assert described["ssl.key.password"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert described["ssl.keystore.password"].source == ConfigSource.DEFAULT_CONFIG
    assert all(SECRET not in str(d.value) for d in described.values())


def test_default_broker_entries() -> None:
    entries = broker_config_entries(ServerConfig())
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:9092"
    assert entries["advertised.listeners"].value is None
    assert entries["authorizer.class.name"].value == ""
    assert entries["allow.everyone.if.no.acl.found"].value == "false"
    assert {e.source for e in entries.values()} == {ConfigSource.DEFAULT_CONFIG}
    changed = broker_config_entries(ServerConfig(default_partitions=4))  # built in code: compared with the default
    assert changed["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG


# ------------------------------------------------------------------------------------------- the process


def test_serve_reads_the_file_end_to_end(tmp_path: Path) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import ConfigResource, ConfigResourceType

    config = tmp_path / "server.properties"
    config.write_text("# regroup\nnum.partitions = 3\nno.such.setting=1\n")
    with served(tmp_path, "--config", str(config)) as server:
        admin = kafka.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{server.port}", client_id="props")
        try:
            resources = [ConfigResource(ConfigResourceType.BROKER, "0")]
            try:  # kafka-python 3.x keeps only DYNAMIC_* ("modified") entries unless told otherwise
                described = admin.describe_configs(resources, config_filter="all")
            except TypeError:  # 2.x: no filter
                described = admin.describe_configs(resources)
        finally:
            admin.close()
        log = server.log()
    entries = _broker_entries(described)
    assert entries["num.partitions"] == ("3", "STATIC_BROKER_CONFIG")
    warnings = [line for line in log.splitlines() if "regroup.server.properties" in line]
    assert len(warnings) == 1 and " WARNING " in warnings[0] and "no.such.setting" in warnings[0], log


def _broker_entries(described: Any) -> dict[str, tuple[str, str]]:
    """name -> (value, source name) from kafka-python's describe_configs (3.x: a dict; 2.x: responses)."""
    if isinstance(described, dict):
        entries = next(iter(described.values()))["0"]
        return {name: (e["value"], _source_name(e["config_source"])) for name, e in entries.items()}
    out = {}
    for response in described:
        for result in response.resources:
            for entry in result[4]:
                out[entry[0]] = (entry[1], _source_name(entry[3]))
    return out


def _source_name(source: Any) -> str:
    return source if isinstance(source, str) else getattr(source, "name", ConfigSource(int(source)).name)


def test_a_bad_value_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"no.such.setting=1\nssl.keystore.password={SECRET}\nlisteners=SSL://:{free_port()}\n"
                      "ssl.keystore.location=/k.pem\n")  # fmt: skip
    command = [sys.executable, "-m", "regroup", "serve", "--config", str(config), "--data-dir", str(tmp_path / "d")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"regroup: {config}: listener SSL (SSL): ssl.keystore.password")
    assert SECRET not in result.stderr

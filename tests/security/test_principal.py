"""Principal text, RFC 2253 distinguished names as Java's ``X500Principal.getName()`` writes them (the expected
strings are Java 17's output for the same certificates), and Kafka's ``ssl.principal.mapping.rules``
(including the cases of Kafka's own ``SslPrincipalMapperTest``)."""

from __future__ import annotations

import pytest

from regroup.security.acl import ANONYMOUS
from regroup.security.principal import (
    NoMatchingRuleError,
    SslPrincipalMapper,
    Subject,
    distinguished_name,
    parse_principal,
    tls_principal,
)

# ---------------------------------------------------------------------- principals


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("User:alice", ("User", "alice")),
        ("User:*", ("User", "*")),
        ("User:", ("User", "")),
        ("Group:a:b", ("Group", "a:b")),
        ("User:CN=x,O=y", ("User", "CN=x,O=y")),
    ],
)
def test_parse_principal(text: str, parsed: tuple[str, str]) -> None:
    assert parse_principal(text) == parsed


@pytest.mark.parametrize("text", ["alice", "", ":alice"])
def test_parse_principal_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_principal(text)


# ---------------------------------------------------------------------- distinguished names

DN_CASES: list[tuple[Subject, str]] = [
    (
        ((("countryName", "US"),), (("organizationName", "Org"),), (("commonName", "alice"),)),
        "CN=alice,O=Org,C=US",
    ),
    (((("commonName", 'a,b+c"d\\e<f>g;h=i#j'),),), 'CN=a\\,b\\+c\\"d\\\\e\\<f\\>g\\;h\\=i\\#j'),
    (
        ((("commonName", "#lead"),), (("organizationalUnitName", " sp "),), (("localityName", "  two  "),)),
        "L=\\ \\ two\\ \\ ,OU=\\ sp\\ ,CN=\\#lead",
    ),
    (
        ((("emailAddress", "foo@example.com"),), (("commonName", "x"),)),
        "CN=x,1.2.840.113549.1.9.1=#160f666f6f406578616d706c652e636f6d",
    ),
    (
        (
            (("serialNumber", "1234"),),
            (("title", "Boss"),),
            (("givenName", "Zoë"),),
            (("surname", "x" * 130),),
        ),
        "2.5.4.4=#0c8182" + "78" * 130 + ",2.5.4.42=#0c045a6fc3ab,2.5.4.12=#0c04426f7373,2.5.4.5=#130431323334",
    ),
    (
        (
            (("domainComponent", "com"),),
            (("domainComponent", "example"),),
            (("userId", "u1"),),
            (("streetAddress", "1 Main"),),
            (("stateOrProvinceName", "MD"),),
        ),
        "ST=MD,STREET=1 Main,UID=u1,DC=example,DC=com",
    ),
    (((("commonName", "a"), ("organizationalUnitName", "b")), (("organizationName", "o"),)), "O=o,CN=a+OU=b"),
    (
        (
            (("commonName", "Zoë é 日本"),),
            (("organizationName", "tab\there"),),
            (("organizationalUnitName", "cr\rx\r"),),
        ),
        "OU=cr\rx\\\r,O=tab\there,CN=Zoë é 日本",
    ),
    (
        ((("1.2.3.4.5", "custom"),), (("dnQualifier", "q"),), (("pseudonym", "p"),)),
        "2.5.4.65=#0c0170,2.5.4.46=#130171,1.2.3.4.5=#0c06637573746f6d",
    ),
    (
        ((("commonName", "a\x00b"),), (("organizationName", "x/y:z(1)'?-."),)),
        "O=x/y:z(1)'?-.,CN=a\\00b",
    ),
    (((("commonName", " "),),), "CN=\\ "),
    ((), ""),
]


@pytest.mark.parametrize(("subject", "dn"), DN_CASES)
def test_distinguished_name_is_javas_rfc2253(subject: Subject, dn: str) -> None:
    assert distinguished_name(subject) == dn


def test_tls_principal() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=([^,]+),.*$/$1/L,DEFAULT")
    subject = ((("organizationName", "Org"),), (("commonName", "Alice"),))
    assert tls_principal(subject, mapper) == "User:alice"
    assert tls_principal(((("commonName", "Bob"),),), mapper) == "User:CN=Bob"
    assert tls_principal(None, mapper) == ANONYMOUS
    assert tls_principal((), mapper) == ANONYMOUS


# ---------------------------------------------------------------------- ssl.principal.mapping.rules

KAFKA_RULES = ", ".join(
    [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
        ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_kafka_mapping_examples(dn: str, name: str) -> None:
    assert SslPrincipalMapper(KAFKA_RULES).principal_name(dn) == name


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        "RULE:(/x/",  # a pattern that does not compile
        "RULE:^(.*)$/$1\\/",  # the escape eats the closing slash
        "RULE:^CN=.*$/$1/",  # a back-reference without any group
        "RULE:^CN=(.*)$/x$/",
        "RULE:^CN=(.*)$/$x/",
        "RULE:^CN=([a-z]+)$/${nope}/",
        "RULE:^CN=(.*)$/${}/",
        "RULE:^CN=(.*)$/${a/",
        "RULE:^CN=(.*)$/${1}/",
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule") as caught:
        SslPrincipalMapper(rules)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("rules", "shown"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/", "[RULE:/.*]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
        ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
        (",   , , ,      , , ,   ", "[]"),
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
        ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
        ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
    ],
)
def test_rules_splitting(rules: str, shown: str) -> None:
    """Kafka's splitting of the rule list: blanks and empty rules ignored, ``\\/`` inside a rule kept."""
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {shown})"


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT", "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz", "Tkac\\, Adam"),
        ("RULE:^CN=(.*)$/$1@$2/", "CN=bob", "bob@$2"),  # past the groups: literal text, as Kafka escapes it
        ("RULE:^CN=(.*)$/$12x/", "CN=bob", "bob2x"),  # Java reads the longest group number that exists
        ("RULE:^CN=(.*)$/$0!/", "CN=bob", "CN=bob!"),
        ("RULE:^CN=(.*)$/$05/", "CN=bob", "CN=bob5"),
        ("RULE:^(C)(N)=(.*)$/$31/", "CN=bob", "bob1"),
        ("RULE:^CN=(?<who>[a-z]+)$/${who}!/U", "CN=bob", "BOB!"),
        ("RULE:^CN=(?<c>[a-z])\\k<c>$/twice $1/", "CN=aa", "twice a"),
        ("RULE:^CN=([a-z]+)$/a\\$1\\\\b/", "CN=bob", "a$1\\b"),
        ("RULE:^CN=([a-z]+)$/a\\/b$1/", "CN=bob", "a/bbob"),
        ("RULE:a\\/b/x/", "a/b", "x"),
        ("RULE:.*/X/", "abc", "XX"),  # every match is replaced, the empty one at the end too (Java's replaceAll)
        ("RULE:(a)|(b)/[$1$2]/", "a", "[a]"),  # a group that did not take part is empty
        ("RULE:^(a)?b$/[$1]/", "b", "[]"),
        ("RULE:^(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)$/$12-$1$13/", "abcdefghijkl", "l-aa3"),
        ("RULE:^CN=([^,]+),.*$/$1/", "CN=Zoë,O=x", "Zoë"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "CN=A,OU=ServiceUsers", "a"),
        ("RULE:^CN=(\\w+)$/$1/U", "CN=alice", "ALICE"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "abc", "abc"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "ABC", "ABC"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "123", "123"),
    ],
)
def test_rule_application(rules: str, dn: str, name: str) -> None:
    """Each answer is what Kafka's ``SslPrincipalMapper`` gives for the same rules and DN."""
    assert SslPrincipalMapper(rules).principal_name(dn) == name


@pytest.mark.parametrize(
    ("rules", "dn"),
    [
        ("", "CN=bob"),
        ("RULE:[a-z]+/-/", "CN=bob"),  # the pattern must match the whole DN
        ("RULE:^CN=(\\w+)$/$1/", "CN=zoë"),  # \w is ASCII, as in Java
    ],
)
def test_no_rule_applies(rules: str, dn: str) -> None:
    with pytest.raises(NoMatchingRuleError, match="No rules apply to"):
        SslPrincipalMapper(rules).principal_name(dn)


def test_default_rules_are_the_dn() -> None:
    assert SslPrincipalMapper().principal_name("CN=x,O=y") == "CN=x,O=y"

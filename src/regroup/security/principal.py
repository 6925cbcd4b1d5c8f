"""Principals as Kafka writes them, and the names TLS clients get.

- ``parse_principal``: Kafka's principal text ``Type:name`` (``User:alice``), split at the first colon.
- ``distinguished_name``: a client certificate's subject, as Python's ``ssl.SSLSocket.getpeercert()`` gives it,
  in the RFC 2253 form Java's ``X500Principal.getName()`` produces, which is what Kafka's
  ``ssl.principal.mapping.rules`` are written against: the most specific RDN first, the keywords CN, C, L, ST,
  O, OU, STREET, DC and UID, every other attribute as its dotted OID with ``#`` and the hex of its DER value
  (the DER string type is inferred from the attribute, as OpenSSL and ``cryptography`` encode it by default:
  exact for certificates they made), and Java's escaping: ``, = + < > # ; " \\`` anywhere, a NUL as ``\\00``,
  leading and trailing spaces and carriage returns.
- ``SslPrincipalMapper``: Kafka's ``ssl.principal.mapping.rules`` (``SslPrincipalMapper``): comma-separated
  ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` to lower- or upper-case the result) and
  ``DEFAULT`` (the DN itself). The first rule whose pattern matches the whole DN names the principal; its
  pattern replaces every match in the DN by the replacement, where ``$1`` / ``${name}`` are back-references and
  ``\\`` escapes the next character (Java's ``Matcher.replaceAll``); a ``$n`` past the pattern's groups is the
  literal text (Kafka's escaping of literal back-references). Patterns are Java regular expressions, run by
  Python's ``re`` in ASCII mode (Java's ``\\w``, ``\\d``, ``\\s`` are ASCII); ``(?<name>...)`` and ``\\k<name>``
  are translated; an inline flag such as ``(?i)`` must open the pattern (Python's rule; Java takes it anywhere).
  Unlike Kafka, which fails on the first DN a broken rule meets, a replacement naming a group the pattern lacks
  (or a ``$`` not followed by a group) is refused when the rules are parsed.
- ``tls_principal``: Kafka's ``DefaultKafkaPrincipalBuilder`` for TLS: ``User:`` and the mapped DN, or
  ``User:ANONYMOUS`` when the client sent no certificate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from regroup.security.acl import ANONYMOUS

__all__ = [
    "DEFAULT_RULES",
    "USER_TYPE",
    "NoMatchingRuleError",
    "SslPrincipalMapper",
    "Subject",
    "distinguished_name",
    "parse_principal",
    "tls_principal",
]

USER_TYPE: Final = "User"
#: Kafka's default ``ssl.principal.mapping.rules``
DEFAULT_RULES: Final = "DEFAULT"

#: ``getpeercert()["subject"]``: the RDNs in certificate order, each a tuple of (attribute, value) pairs
Subject: TypeAlias = Sequence[Sequence[tuple[str, str]]]


def parse_principal(text: str) -> tuple[str, str]:
    """``(type, name)`` of ``Type:name``, split at the first colon. No colon, or an empty type, is a
    ``ValueError`` (Kafka's ``SecurityUtils.parseKafkaPrincipal`` message; the empty type is regroup's check)."""
    principal_type, colon, name = text.partition(":")
    if not colon or not principal_type:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return principal_type, name


# ---------------------------------------------------------------------- RFC 2253 distinguished names

#: Python's (OpenSSL's) long attribute names -> the keywords Java's RFC 2253 form uses
_KEYWORDS: Final = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}

_UTF8, _PRINTABLE, _IA5 = 0x0C, 0x13, 0x16

#: the other long names Python may give -> (OID, the DER string type OpenSSL and ``cryptography`` use for it)
_OIDS: Final = {
    "emailAddress": ("1.2.840.113549.1.9.1", _IA5),
    "serialNumber": ("2.5.4.5", _PRINTABLE),
    "dnQualifier": ("2.5.4.46", _PRINTABLE),
    "jurisdictionCountryName": ("1.3.6.1.4.1.311.60.2.1.3", _PRINTABLE),
    "jurisdictionStateOrProvinceName": ("1.3.6.1.4.1.311.60.2.1.2", _UTF8),
    "jurisdictionLocalityName": ("1.3.6.1.4.1.311.60.2.1.1", _UTF8),
    "surname": ("2.5.4.4", _UTF8),
    "title": ("2.5.4.12", _UTF8),
    "description": ("2.5.4.13", _UTF8),
    "businessCategory": ("2.5.4.15", _UTF8),
    "postalAddress": ("2.5.4.16", _UTF8),
    "postalCode": ("2.5.4.17", _UTF8),
    "postOfficeBox": ("2.5.4.18", _UTF8),
    "telephoneNumber": ("2.5.4.20", _UTF8),
    "name": ("2.5.4.41", _UTF8),
    "givenName": ("2.5.4.42", _UTF8),
    "initials": ("2.5.4.43", _UTF8),
    "generationQualifier": ("2.5.4.44", _UTF8),
    "pseudonym": ("2.5.4.65", _UTF8),
    "role": ("2.5.4.72", _UTF8),
    "organizationIdentifier": ("2.5.4.97", _UTF8),
    "unstructuredName": ("1.2.840.113549.1.9.2", _UTF8),
    "unstructuredAddress": ("1.2.840.113549.1.9.8", _UTF8),
}

#: characters Java's RFC 2253 form escapes wherever they are
_ESCAPED: Final = frozenset(',=+<>#;"\\')
_PRINTABLE_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?")


def distinguished_name(subject: Subject) -> str:
    """The RFC 2253 text of ``subject`` as Java's ``X500Principal.getName()`` gives it (see the module doc):
    RDNs most specific first (reverse certificate order), the attributes of one RDN joined by ``+``."""
    return ",".join("+".join(_attribute(attr, value) for attr, value in rdn) for rdn in reversed(subject))


def _attribute(attr: str, value: str) -> str:
    keyword = _KEYWORDS.get(attr)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid, tag = _OIDS.get(attr, (attr, _UTF8))
    return f"{oid}=#{_der_string(value, tag).hex()}"


def _escape(value: str) -> str:
    chars = ["\\00" if c == "\0" else "\\" + c if c in _ESCAPED else c for c in value]
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        lead += 1
    trail = len(chars)
    while trail > lead and chars[trail - 1] in (" ", "\r"):
        trail -= 1
    for i in (*range(lead), *range(trail, len(chars))):
        chars[i] = "\\" + chars[i]
    return "".join(chars)


def _der_string(value: str, tag: int) -> bytes:
    if (tag == _PRINTABLE and not set(value) <= _PRINTABLE_CHARS) or (tag == _IA5 and not value.isascii()):
        tag = _UTF8
    data = value.encode("utf-8")
    size = len(data)
    if size < 0x80:
        length = bytes([size])
    else:
        octets = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(octets)]) + octets
    return bytes([tag]) + length + data


def tls_principal(subject: Subject | None, mapper: SslPrincipalMapper) -> str:
    """The principal of a TLS client: ``User:`` + the mapped DN of its certificate's subject, ``User:ANONYMOUS``
    without a certificate (None or empty, as ``getpeercert()`` gives then). Raises :class:`NoMatchingRuleError`
    when no rule maps the DN (Kafka fails the authentication)."""
    if not subject:
        return ANONYMOUS
    return f"{USER_TYPE}:{mapper.principal_name(distinguished_name(subject))}"


# ---------------------------------------------------------------------- ssl.principal.mapping.rules

_RULE: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER: Final = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_RULE_PARSER: Final = re.compile(_RULE, re.ASCII)
_NAMED_GROUP: Final = re.compile(r"(?<!\\)((?:\\\\)*)\(\?<([A-Za-z][A-Za-z0-9]*)>")
_NAMED_REFERENCE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\k<([A-Za-z][A-Za-z0-9]*)>")


class NoMatchingRuleError(LookupError):
    """No mapping rule applies to a DN (Kafka's ``NoMatchingRule``)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    text: str
    pattern: re.Pattern[str] | None  # None: DEFAULT
    #: the replacement: literal text and group numbers
    parts: tuple[str | int, ...] = ()
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self._replacement, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _replacement(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else match.group(part) or "" for part in self.parts)


class SslPrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules`` (see the module doc). ``rules`` that do not parse raise
    ``ValueError`` with a one-line message."""

    def __init__(self, rules: str = DEFAULT_RULES) -> None:
        self.rules = rules
        self._rules = tuple(_parse_rule(text) for text in _split_rules(rules))

    def principal_name(self, dn: str) -> str:
        """The name the first rule that applies gives ``dn``; :class:`NoMatchingRuleError` when none does."""
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRuleError(f"No rules apply to {dn}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(rule.text for rule in self._rules)}])"


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip()) if m.group(1)]


def _parse_rule(text: str) -> _Rule:
    match = _RULE_PARSER.match(text)
    if match is None or match.end() != len(text):
        end = 0 if match is None else match.end()
        raise ValueError(f"Invalid rule: `{text}`, unmatched substring: `{text[end:]}`")
    if match.group(1) is not None:
        return _Rule("DEFAULT", None)
    java_pattern, replacement, case = match.group(2), match.group(4), match.group(6)
    try:
        pattern = re.compile(_python_regex(java_pattern), re.ASCII)
    except re.error as exc:
        raise ValueError(f"Invalid rule: `{text}`: bad pattern: {exc}") from None
    try:
        parts = _replacement_parts(replacement, pattern)
    except ValueError as exc:
        raise ValueError(f"Invalid rule: `{text}`: bad replacement: {exc}") from None
    shown = f"RULE:{java_pattern}/{replacement}" + (f"/{case}" if case else "")
    return _Rule(shown, pattern, parts, case)


def _python_regex(java: str) -> str:
    """Java's named groups and named back-references in Python's spelling."""
    python = _NAMED_GROUP.sub(lambda m: f"{m.group(1)}(?P<{m.group(2)}>", java)
    return _NAMED_REFERENCE.sub(lambda m: f"{m.group(1)}(?P={m.group(2)})", python)


def _replacement_parts(replacement: str, pattern: re.Pattern[str]) -> tuple[str | int, ...]:
    """``replacement`` read as Java's ``Matcher.appendReplacement`` reads it, with Kafka's rule that a
    ``$n`` past the pattern's groups (when it has any) is literal text."""
    groups = pattern.groups
    parts: list[str | int] = []
    literal: list[str] = []
    i, size = 0, len(replacement)
    while i < size:
        c = replacement[i]
        if c == "\\":
            if i + 1 == size:
                raise ValueError("character to be escaped is missing")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if i + 1 == size:
            raise ValueError("Illegal group reference: group index is missing")
        nxt = replacement[i + 1]
        if nxt == "{":
            end = i + 2
            while end < size and replacement[end].isascii() and replacement[end].isalnum():
                end += 1
            name = replacement[i + 2 : end]
            if not name:
                raise ValueError("named capturing group has 0 length name")
            if end == size or replacement[end] != "}":
                raise ValueError("named capturing group is missing trailing '}'")
            if name[0].isdigit():
                raise ValueError(f"capturing group name {{{name}}} starts with digit character")
            if name not in pattern.groupindex:
                raise ValueError(f"No group with name {{{name}}}")
            ref, i = pattern.groupindex[name], end + 1
        elif "0" <= nxt <= "9":
            ref, i = int(nxt), i + 2
            if ref > groups:
                if groups == 0:
                    raise ValueError(f"No group {ref}")
                literal.append("$")  # Kafka escapes a back-reference past the groups: the text stays
                i -= 1
                continue
            while i < size and "0" <= replacement[i] <= "9" and ref * 10 + int(replacement[i]) <= groups:
                ref, i = ref * 10 + int(replacement[i]), i + 1
        else:
            raise ValueError("Illegal group reference")
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(ref)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)

"""Kafka's ``sasl.jaas.config`` values: ``<LoginModuleClass> <flag> key="value" key2=value2 ... ;`` parsed into
:class:`JaasEntry` (what Kafka's ``JaasConfig`` reads with Java's ``StreamTokenizer``), and the users of
``PlainLoginModule``'s ``user_NAME="password"`` convention.

Grammar, as Kafka accepts it: one or more entries, each a login module class name, a control flag
(``required``, ``requisite``, ``sufficient`` or ``optional``, any case) and options ``name=value``, closed by
``;``. A value is a bare word or a quoted string (``"..."`` or ``'...'``, where a backslash escapes the next
character and ``\\n``, ``\\t``, ``\\r`` stand for themselves); ``//`` and ``/* */`` comments are skipped
between tokens. A name given twice keeps its last value, as in Kafka. Bare words are a little more liberal
than Kafka's (a bare number is accepted here; Kafka wants it quoted).

Options hold passwords, so a :class:`JaasError` gives positions, never an option's name or value (a stray
word may be part of an unquoted password).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = ["CONTROL_FLAGS", "JaasEntry", "JaasError", "parse_jaas", "parse_jaas_entry", "plain_users"]

#: the control flags JAAS defines (Kafka reads them case-insensitively)
CONTROL_FLAGS: Final = ("required", "requisite", "sufficient", "optional")
#: the prefix of PlainLoginModule's user options: ``user_alice="alice-secret"``
PLAIN_USER_PREFIX: Final = "user_"

_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_SPECIALS: Final = frozenset("=;\"'")


class JaasError(ValueError):
    """A malformed ``sasl.jaas.config`` value. The message is one line and never holds an option's value."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One login module of a JAAS configuration: its class, its control flag (lower case) and its options."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # the options hold passwords: show their names only
        return f"JaasEntry({self.login_module!r}, {self.control_flag!r}, options={sorted(self.options)})"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "quoted" or one of "=", ";"
    text: str
    pos: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError(f"unterminated comment at position {i} in JAAS config")
            i = end + 2
        elif c in "=;":
            out.append(_Token(c, c, i))
            i += 1
        elif c in "\"'":
            value, i = _quoted(text, i)
            out.append(value)
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIALS:
                i += 1
            out.append(_Token("word", text[start:i], start))
    return out


def _quoted(text: str, start: int) -> tuple[_Token, int]:
    quote = text[start]
    chars: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return _Token("quoted", "".join(chars), start), i + 1
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        chars.append(c)
        i += 1
    raise JaasError(f"unterminated quoted string at position {start} in JAAS config")


def parse_jaas(text: str) -> list[JaasEntry]:
    """Every entry of a ``sasl.jaas.config`` value, in order; raises :class:`JaasError`."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        module = tokens[i]
        if module.kind not in ("word", "quoted") or not module.text:
            raise JaasError(f"login module class expected at position {module.pos} in JAAS config")
        i += 1
        if i >= len(tokens):
            raise JaasError("Login module control flag not specified in JAAS config")
        flag_token = tokens[i]
        flag = flag_token.text.lower() if flag_token.kind in ("word", "quoted") else ""
        if flag not in CONTROL_FLAGS:
            raise JaasError(f"Invalid login module control flag at position {flag_token.pos} in JAAS config")
        i += 1
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise JaasError("JAAS config entry not terminated by semi-colon")
            key = tokens[i]
            if key.kind == ";":
                i += 1
                break
            if key.kind not in ("word", "quoted") or not key.text:
                raise JaasError(f"option name expected at position {key.pos} in JAAS config")
            if i + 2 >= len(tokens) or tokens[i + 1].kind != "=" or tokens[i + 2].kind not in ("word", "quoted"):
                # (no name in the message: a stray word may be part of an unquoted password)
                raise JaasError(f"Value not specified for the option at position {key.pos} in JAAS config")
            options[key.text] = tokens[i + 2].text
            i += 3
        entries.append(JaasEntry(module.text, flag, options))
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries


def parse_jaas_entry(text: str) -> JaasEntry:
    """The one entry of a listener's ``sasl.jaas.config`` (Kafka requires exactly one login module there)."""
    entries = parse_jaas(text)
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PLAIN's users, name -> password, from the ``user_NAME="password"`` options (PlainLoginModule's
    convention; any other option is ignored, as is a bare ``user_``)."""
    return {
        key[len(PLAIN_USER_PREFIX) :]: value
        for key, value in entry.options.items()
        if key.startswith(PLAIN_USER_PREFIX) and len(key) > len(PLAIN_USER_PREFIX)
    }

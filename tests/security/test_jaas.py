"""JAAS configuration values as Kafka's ``sasl.jaas.config`` holds them (``security/jaas.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.security.jaas import JaasEntry, JaasError, parse_jaas, parse_jaas_entry, plain_users

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_plain_login_module_with_users() -> None:
    text = (
        f'{PLAIN} required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice secret";'
    )
    entry = parse_jaas_entry(text)
    assert entry == JaasEntry(
        PLAIN,
        "required",
        {
            "username": "admin",
            "password": "admin-secret",
            "user_admin": "admin-secret",
            "user_alice": "alice secret",
        },
    )
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice secret"}


def test_quotes_escapes_bare_words_and_comments() -> None:
    text = (
        "Module  REQUISITE\n  a=bare_word-1.$x  b='single quoted'  // a comment\n"
        '  c="with \\"escaped\\" quotes and \\\\ backslash"  /* block\ncomment */ d="" e="semi;colon=eq" ;'
    )
    entry = parse_jaas_entry(text)
    assert entry.control_flag == "requisite"
    assert entry.options == {
        "a": "bare_word-1.$x",
        "b": "single quoted",
        "c": 'with "escaped" quotes and \\ backslash',
        "d": "",
        "e": "semi;colon=eq",
    }


def test_no_options_and_every_flag() -> None:
    for flag in ("required", "Requisite", "SUFFICIENT", "optional"):
        assert parse_jaas_entry(f"M {flag};") == JaasEntry("M", flag.lower(), {})


def test_a_repeated_option_keeps_its_last_value() -> None:
    assert parse_jaas_entry('M required k="1" k="2";').options == {"k": "2"}


def test_several_entries() -> None:
    entries = parse_jaas('A required x="1"; B optional;')
    assert [e.login_module for e in entries] == ["A", "B"]
    with pytest.raises(JaasError, match="contains 2 login modules, should be 1"):
        parse_jaas_entry('A required x="1"; B optional;')


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   // only a comment\n",
        "M",
        "M required",
        'M required password="hunter2"',
        "M mandatory;",
        'M required password "hunter2";',
        "M required password=;",
        'M required password="hunter2',
        "M required = x;",
        "M required /* open comment",
        "; M required;",
    ],
)
def test_malformed_values_raise_jaas_error(text: str) -> None:
    with pytest.raises(JaasError) as info:
        parse_jaas(text)
    message = str(info.value)
    assert "\n" not in message
    assert "hunter2" not in message


def test_messages_never_show_values_even_of_unquoted_passwords() -> None:
    with pytest.raises(JaasError) as info:
        parse_jaas_entry("M required user_alice=my secret phrase;")
    assert "secret" not in str(info.value) and "phrase" not in str(info.value)
    assert "secret" not in repr(parse_jaas_entry('M required user_bob="secret";'))


def test_plain_users_ignores_other_options() -> None:
    entry = JaasEntry(PLAIN, "required", {"username": "u", "user_": "x", "user_bob": "b", "userjoe": "j"})
    assert plain_users(entry) == {"bob": "b"}


@given(st.text(max_size=200))
def test_any_text_parses_or_raises_jaas_error(text: str) -> None:
    try:
        entries = parse_jaas(text)
    except JaasError as exc:
        assert "\n" not in str(exc)
    else:
        assert entries and all(e.control_flag in ("required", "requisite", "sufficient", "optional") for e in entries)


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,10}", fullmatch=True),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
        max_size=5,
    )
)
def test_quoted_values_round_trip(options: dict[str, str]) -> None:
    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    text = "M required " + " ".join(f"{k}={quote(v)}" for k, v in options.items()) + ";"
    assert parse_jaas_entry(text).options == options

"""``detail_fields``: the ``key=value`` fields of an event-log row's ``detail``, values with spaces included."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.model.eventlog import detail_fields


def test_fields_as_the_server_writes_them() -> None:
    detail = "group=orders type=classic protocol=range rebalance=eager leader=c0-1 cause=join"
    assert detail_fields(detail) == {
        "group": "orders",
        "type": "classic",
        "protocol": "range",
        "rebalance": "eager",
        "leader": "c0-1",
        "cause": "join",
    }


def test_values_keep_their_spaces() -> None:
    assert detail_fields("group=my group  /1 type=consumer leader=a b-9") == {
        "group": "my group  /1",
        "type": "consumer",
        "leader": "a b-9",
    }


def test_nothing_repeated_empty_and_stray() -> None:
    assert detail_fields(None) == {}
    assert detail_fields("") == {}
    assert detail_fields("stray y=1 y=2 tail") == {"y": "1"}


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_/. ", min_size=1).filter(
    lambda s: "=" not in s and not s.startswith(" ")
)


@given(group=names, protocol=st.sampled_from(["range", "uniform", "cooperative-sticky"]))
def test_any_group_id_without_an_equals_sign_comes_back_whole(group: str, protocol: str) -> None:
    fields = detail_fields(f"group={group} type=classic protocol={protocol}")
    assert fields["group"] == group
    assert fields["protocol"] == protocol

"""``rows.tokens`` remembers the last ``detail`` it read: whatever the order of the strings it is asked for,
each answer equals ``detail_fields`` of that string, and each is the caller's own (changing one changes no
later answer)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.history.rows import tokens
from regroup.model.eventlog import detail_fields

DETAILS = st.sampled_from(
    [None, "", "group=g type=consumer", "group=g type=consumer", "group=h  x cause=join", "plain words", "k=v k=w"]
)


@given(st.lists(DETAILS, max_size=12))
def test_each_answer_is_the_fields_of_its_string_and_the_callers_own(details: list[str | None]) -> None:
    for detail in details:
        fields = tokens(detail)
        assert fields == detail_fields(detail)
        fields["group"] = "changed"  # (the caller's own: the next answer is not affected)

"""``event_line`` writes exactly what ``json.dumps(row, separators=(",", ":"))`` writes, whatever the row holds:
ASCII and non-ASCII text, DEL and control characters, integers of any size, floats, booleans, nulls."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.model.eventlog import FIELDS, event_line

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # (past 64 bits orjson refuses: json writes them)
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F)),
)


@settings(max_examples=500, deadline=None)
@given(st.fixed_dictionaries({name: values for name in FIELDS}))
def test_a_line_is_what_json_writes(row: dict[str, Any]) -> None:
    assert event_line(row) == json.dumps(row, separators=(",", ":"))


def test_text_outside_ascii_and_del_are_escaped_as_json_escapes_them() -> None:
    row = dict.fromkeys(FIELDS)
    row.update(seq=1, t=2, type="group_state", detail="group=caf\u00e9 \x7f \U0001f600")
    line = event_line(row)
    assert line.isascii() and "\\u00e9" in line and "\\u007f" in line and "\\ud83d\\ude00" in line
    assert json.loads(line) == row

"""The event log's line schema, shared by every writer (the simulator, ``regroup serve --event-log``) and the
lab that reads them: one flat JSON object per line with exactly these keys, in this order (absent values are
``null``). The schema is documented in docs/simulator.md; keep it stable."""

from __future__ import annotations

from typing import Final

#: Every line has exactly these keys, in this order.
FIELDS: Final = (
    "seq",
    "t",
    "type",
    "member",
    "member_id",
    "generation",
    "api",
    "request_id",
    "error",
    "state",
    "topic",
    "partition",
    "value",
    "detail",
)

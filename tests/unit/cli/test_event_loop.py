"""``regroup serve --event-loop``: which loop factory each choice gives, and a refusal when uvloop is asked for but
missing."""

from __future__ import annotations

import asyncio
import sys

import pytest

from regroup.cli.serve import ServeError, event_loop_factory


def test_asyncio_choice_is_asyncios_own_loop() -> None:
    assert event_loop_factory("asyncio") is None


@pytest.mark.parametrize("choice", ["auto", "uvloop"])
def test_uvloop_is_used_where_installed(choice: str) -> None:
    uvloop = pytest.importorskip("uvloop")
    factory = event_loop_factory(choice)
    assert factory is uvloop.new_event_loop
    loop = factory()
    try:
        assert isinstance(loop, asyncio.AbstractEventLoop)
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_missing_uvloop_falls_back_for_auto_and_refuses_for_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert event_loop_factory("auto") is None
    with pytest.raises(ServeError, match="uvloop is not installed"):
        event_loop_factory("uvloop")

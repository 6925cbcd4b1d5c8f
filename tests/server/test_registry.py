"""The handler registry: every module is part of the server (one that does not import fails the start) and
no two modules serve one API key."""

from __future__ import annotations

import sys
import types

import pytest

from regroup.server.handlers.registry import MODULES, PACKAGE, RegistryError, load_specs


def test_every_module_loads_and_each_api_is_served_once() -> None:
    specs = load_specs()
    assert len(specs) == sum(len(sys.modules[f"{PACKAGE}.{name}"].SPECS) for name in MODULES)
    assert {17, 36, 29, 30, 31, 50, 51, 11, 68, 0, 1, 3} <= specs.keys()


def test_a_clash_or_a_broken_module_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    clone = types.ModuleType(f"{PACKAGE}.clone")
    clone.SPECS = sys.modules[f"{PACKAGE}.meta"].SPECS  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, f"{PACKAGE}.clone", clone)
    with pytest.raises(RegistryError, match="already served"):
        load_specs(("meta", "clone"))
    with pytest.raises(ModuleNotFoundError):
        load_specs(("meta", "no_such_module"))

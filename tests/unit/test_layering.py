"""The core never imports a shell, a clock, a socket, threads or Spark (the layering rule of
docs/architecture.md), checked on the source with the ``ast`` module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "regroup"
CORE = ["model", "timeline", "protocol", "records", "assignors", "runtime", "coordinator", "client"]
FORBIDDEN_MODULES = {"asyncio", "socket", "selectors", "threading", "time", "random", "pyspark", "subprocess"}
SHELLS = {"regroup.server", "regroup.sim", "regroup.lab", "regroup.storage", "regroup.cli"}
FORBIDDEN_CALLS = {"uuid4", "monotonic", "perf_counter"}


def imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def core_files() -> list[Path]:
    return [p for pkg in CORE if (SRC / pkg).is_dir() for p in sorted((SRC / pkg).rglob("*.py"))]


def test_there_is_core_code_to_check() -> None:
    assert core_files(), "no core package found under src/regroup"


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_core_module_stays_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for module in imported_modules(tree):
        root = module.split(".")[0]
        assert root not in FORBIDDEN_MODULES, f"{path.name} imports {module}"
        assert not any(module == s or module.startswith(s + ".") for s in SHELLS), f"{path.name} imports {module}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            assert name not in FORBIDDEN_CALLS, f"{path.name} calls {name}()"

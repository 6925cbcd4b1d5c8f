"""The import rules of docs/architecture.md ("Import rules"), checked on the source with the ``ast`` module:
the core never imports a shell, a clock, a socket, threads or Spark; a shell imports only the shells its row
of ``SHELL_IMPORTS`` allows. Every package named here must exist, so a renamed or removed package fails the
test instead of silently going unchecked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "regroup"
CORE = ["model", "protocol", "records", "assignors", "coordinator", "client", "transactions", "security", "history"]
FORBIDDEN_MODULES = {"asyncio", "socket", "selectors", "threading", "time", "random", "pyspark", "subprocess"}
FORBIDDEN_CALLS = {"uuid4", "monotonic", "perf_counter"}
#: shell -> the other shells it may import. ``storage`` is the on-disk log the server writes; the lab runs the
#: simulator; ``console`` is the operator's HTTP console the server serves (it reads the server only through the
#: view the server hands it); ``cli`` is the entry point and may reach every shell. Nothing else crosses between
#: shells.
SHELL_IMPORTS: dict[str, frozenset[str]] = {
    "storage": frozenset(),
    "sim": frozenset(),
    "network": frozenset(),
    "server": frozenset({"storage", "network", "console"}),
    "console": frozenset(),
    "lab": frozenset({"sim"}),
    "adapters": frozenset(),
    "cli": frozenset({"storage", "sim", "server", "lab", "network", "console"}),
}
SHELLS = sorted(SHELL_IMPORTS)


def imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def shell_of(module: str) -> str | None:
    """The shell a ``regroup.<shell>...`` module belongs to, or None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "regroup" and parts[1] in SHELL_IMPORTS else None


def files_of(packages: list[str]) -> list[Path]:
    return [p for pkg in packages for p in sorted((SRC / pkg).rglob("*.py"))]


@pytest.mark.parametrize("package", CORE + SHELLS)
def test_every_named_package_exists(package: str) -> None:
    assert (SRC / package / "__init__.py").is_file(), f"src/regroup/{package} is named here but does not exist"


def test_every_package_is_named() -> None:
    present = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert present == set(CORE) | set(SHELLS), "a package is neither core nor shell here: classify it"


@pytest.mark.parametrize("path", files_of(CORE), ids=lambda p: str(p.relative_to(SRC)))
def test_core_module_stays_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for module in imported_modules(tree):
        root = module.split(".")[0]
        assert root not in FORBIDDEN_MODULES, f"{path.name} imports {module}"
        assert shell_of(module) is None, f"{path.name} imports the shell module {module}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            assert name not in FORBIDDEN_CALLS, f"{path.name} calls {name}()"


@pytest.mark.parametrize("path", files_of(SHELLS), ids=lambda p: str(p.relative_to(SRC)))
def test_shell_imports_only_the_shells_it_may(path: Path) -> None:
    own = path.relative_to(SRC).parts[0]
    for module in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
        other = shell_of(module)
        if other is not None and other != own:
            assert other in SHELL_IMPORTS[own], f"{path.relative_to(SRC)} imports {module} ({own} -> {other})"


def test_the_shell_rule_catches_a_crossing() -> None:
    tree = ast.parse("from regroup.sim.eventlog import FIELDS\nimport regroup.cli.main\n")
    crossings = [m for m in imported_modules(tree) if shell_of(m) not in (None, *SHELL_IMPORTS["server"])]
    assert crossings == ["regroup.sim.eventlog", "regroup.cli.main"]

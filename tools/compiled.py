"""Which modules the compiled build (``setup.py`` with ``REGROUP_COMPILE=1``) compiles with mypyc."""

from __future__ import annotations

from pathlib import Path

#: Packages compiled whole (recursively), relative to src/regroup.
COMPILED_PACKAGES = ("model", "records", "protocol", "client", "coordinator", "sim", "assignors")
#: Modules of those packages left interpreted: kio's entity dataclasses with ClassVar fields do not compile, so
#: they and the kio fallbacks of the consumer protocol live in their own module (its struct fast paths compile).
#: kept interpreted: kio's generated classes, and the assignors' lazy ``Mapping`` results (a compiled class cannot
#: derive from ``collections.abc.Mapping``)
INTERPRETED = frozenset(
    {
        "assignors/consumer_protocol_kio.py",
        "assignors/array_assignment.py",
        "assignors/lazy_assignment.py",
        "assignors/range_assignment.py",
        "assignors/roundrobin_assignment.py",
    }
)
#: The lab's per-run modules (what a Spark task runs); the Spark side stays interpreted.
COMPILED_LAB = ("metrics", "payload", "protocols", "scenarios", "grid", "tables", "runner")


def compiled_paths(root: Path) -> list[str]:
    """The compiled modules' source files, relative to the project root ``root``."""
    package = root / "src" / "regroup"
    files = [p for name in COMPILED_PACKAGES for p in sorted((package / name).rglob("*.py"))]
    files += [package / "lab" / f"{name}.py" for name in COMPILED_LAB]
    return [p.relative_to(root).as_posix() for p in files if p.relative_to(package).as_posix() not in INTERPRETED]


def compiled_modules(root: Path) -> list[str]:
    """The compiled modules' names (``regroup.coordinator.coordinator``, ...)."""
    return [path.removeprefix("src/").removesuffix(".py").replace("/", ".") for path in compiled_paths(root)]

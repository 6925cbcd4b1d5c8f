"""Build script. Everything about the package is in pyproject.toml; this file only adds the optional compiled
build of the simulator's hot path.

Without ``REGROUP_COMPILE=1`` it is plain setuptools and adds nothing: ``pip install -e .`` (what ``make run``
and ``make test`` do) installs the interpreted package as before, no compiler needed.

With ``REGROUP_COMPILE=1``, mypyc compiles the deterministic core and the simulator (the modules listed
below) to C extension modules, next to their ``.py`` sources in the installed package::

    REGROUP_COMPILE=1 pip install --no-build-isolation .   # needs mypy and a C compiler (``make compiled``)

Compiling writes nothing to ``src/``: an editable or in-place compiled build of this source tree is refused
(the tests build in-place only in a temporary copy of it, which has no ``.git``).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

#: Packages compiled whole (recursively), relative to src/regroup.
COMPILED_PACKAGES = ("model", "records", "protocol", "client", "coordinator", "sim", "assignors")
#: Modules of those packages left interpreted: kio's entity dataclasses with ClassVar fields do not compile, so
#: they and the kio fallbacks of the consumer protocol live in their own module (its struct fast paths compile).
INTERPRETED = frozenset({"assignors/consumer_protocol_kio.py"})
#: The lab's per-run modules (what a Spark task runs); the Spark side stays interpreted.
COMPILED_LAB = ("metrics", "payload", "protocols", "scenarios", "grid", "tables", "runner")


def compiled_paths() -> list[str]:
    """The compiled modules' source files, relative to the project root."""
    package = ROOT / "src" / "regroup"
    files = [p for name in COMPILED_PACKAGES for p in sorted((package / name).rglob("*.py"))]
    files += [package / "lab" / f"{name}.py" for name in COMPILED_LAB]
    return [p.relative_to(ROOT).as_posix() for p in files if p.relative_to(package).as_posix() not in INTERPRETED]


class ParallelBuildExt(build_ext):
    """``build_ext`` that compiles the C files of one extension on every core (mypyc's shared library has one
    C file per module) and builds the extensions themselves in parallel too."""

    def finalize_options(self) -> None:
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1
        super().finalize_options()

    def build_extension(self, ext: Any) -> None:
        compiler = self.compiler
        if len(ext.sources) > 1 and not getattr(compiler, "_regroup_parallel", False):
            _parallel_compile(compiler, self.parallel)
        super().build_extension(ext)


def _parallel_compile(compiler: Any, workers: int) -> None:
    """Make ``compiler.compile`` (distutils' serial loop over sources) compile the sources concurrently."""

    def compile_all(
        sources: list[str],
        output_dir: str | None = None,
        macros: Any = None,
        include_dirs: Any = None,
        debug: bool = False,
        extra_preargs: Any = None,
        extra_postargs: Any = None,
        depends: Any = None,
    ) -> list[str]:
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            if obj in build:
                src, ext = build[obj]
                compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(one, objects))
        return list(objects)

    compiler.compile = compile_all
    compiler._regroup_parallel = True


#: The commands that build extension modules; metadata commands (egg_info, dist_info, ...) compile nothing.
BUILDING = frozenset(
    {"build", "build_ext", "bdist_wheel", "bdist", "bdist_egg", "install", "develop", "editable_wheel"}
)


def compiling() -> bool:
    return os.environ.get("REGROUP_COMPILE") == "1" and bool(BUILDING & set(sys.argv[1:]))


def ext_modules() -> list[Any]:
    in_place = {"develop", "editable_wheel", "--inplace", "-i"} & set(sys.argv[1:])
    if in_place and (ROOT / ".git").exists():
        raise SystemExit(
            "REGROUP_COMPILE=1: an editable or in-place build would write compiled modules into src/; "
            "install non-editable (make compiled) or build in a copy of the tree"
        )
    from mypyc.build import mypycify

    os.chdir(ROOT)  # mypyc's paths, its C output (build/) and the mypy configuration are relative to the root
    options = ["--config-file", "pyproject.toml", "--cache-dir", "build/mypyc-cache"]
    return mypycify([*options, *compiled_paths()], opt_level="3", multi_file=True)


if compiling():
    setup(ext_modules=ext_modules(), cmdclass={"build_ext": ParallelBuildExt})
else:
    setup()

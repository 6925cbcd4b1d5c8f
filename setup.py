"""Build script. Everything about the package is in pyproject.toml; this file only adds the optional compiled
build of the simulator's hot path.

Without ``REGROUP_COMPILE=1`` it is plain setuptools and adds nothing: ``pip install -e .`` (what ``make run``
and ``make test`` do) installs the interpreted package as before, no compiler needed.

With ``REGROUP_COMPILE=1``, mypyc compiles the deterministic core and the simulator (the modules listed in
``tools/compiled.py``) to C extension modules, next to their ``.py`` sources in the installed package. It
compiles a copy of them (``build/generated/src``) in which each dataclass carries its ``__init__`` written out,
generated from its annotations by ``tools/constructors.py``: mypyc compiles only a written ``__init__``::

    REGROUP_COMPILE=1 pip install --no-build-isolation .   # needs mypy and a C compiler (``make compiled``)

Compiling writes nothing to ``src/``: an editable or in-place compiled build of this source tree is refused
(the tests build in-place only in a temporary copy of it, which has no ``.git``).
"""

from __future__ import annotations

import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # the build's own tools (tools/: which modules compile, their constructors)


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
    from tools.compiled import compiled_paths

    return mypycify([*options, *generated_sources(compiled_paths(ROOT))], opt_level="3", multi_file=True)


def generated_sources(paths: list[str]) -> list[str]:
    """A copy of ``src/`` under ``build/generated`` in which the compiled modules' dataclasses carry a written
    ``__init__`` (``tools/constructors.py``); the paths of those modules in it."""
    from tools.constructors import GenerationError, generate_file

    copy = Path("build") / "generated"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree("src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
    try:
        for path in paths:
            generate_file(copy / path)
    except GenerationError as exc:
        raise SystemExit(f"REGROUP_COMPILE=1: {exc}") from None
    return [(copy / path).as_posix() for path in paths]


if compiling():
    setup(ext_modules=ext_modules(), cmdclass={"build_ext": ParallelBuildExt})
else:
    setup()

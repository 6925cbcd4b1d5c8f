"""``bench/server.py`` as a module for the other benchmarks (their ``sb``: its wire connections, codecs, server
process and machine facts), loaded once per process under the name ``bench_server`` (dataclasses look their
module up by name). Every benchmark runs as a script from this folder, so ``from server_loader import
load_server_bench`` finds this file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

NAME = "bench_server"


def load_server_bench() -> Any:
    """The ``bench_server`` module, loaded from ``server.py`` beside this file the first time."""
    loaded = sys.modules.get(NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(NAME, Path(__file__).with_name("server.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module

"""What the lab needs before Spark starts, checked first by every ``regroup lab`` command: its Python extra
(PySpark, matplotlib and pyarrow: ``pip install 'regroup[lab]'``) and a Java runtime, 17 or newer (Spark 4's
minimum). Each missing piece is one line that says what to install, instead of PySpark's ``JAVA_HOME is not
set`` and ``[JAVA_GATEWAY_EXITED]``.

Java is found as PySpark's launcher finds it: ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set, else ``java``
on the ``PATH``. This module imports none of the extra's modules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path
from typing import Final

JAVA_MINIMUM: Final = 17
JAVA_HINT: Final = f"the lab needs Java {JAVA_MINIMUM} or newer, e.g. apt-get install openjdk-17-jre-headless"
EXTRA_HINT: Final = "the lab needs its extra dependencies: pip install 'regroup[lab]'"
#: the modules of the ``lab`` extra the lab's driver imports
EXTRA_MODULES: Final = ("pyspark", "matplotlib", "pyarrow")


def missing_extra() -> list[str]:
    """The lab extra's modules that cannot be imported here."""
    out: list[str] = []
    for name in EXTRA_MODULES:
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def java_executable() -> Path | None:
    """The ``java`` PySpark will start: ``$JAVA_HOME/bin/java`` if ``JAVA_HOME`` is set, else the ``PATH``'s."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return candidate if candidate.is_file() else None
    found = shutil.which("java")
    return Path(found) if found else None


def java_major(version_output: str) -> int | None:
    """The major version in ``java -version``'s output (``openjdk version "17.0.15"`` → 17, ``java version
    "1.8.0_402"`` → 8), or None if it names none."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:  # Java 8 and older: 1.x
        return int(match.group(2))
    return major


def java_problem() -> str | None:
    """None when a usable Java is there, else the one line to show."""
    java = java_executable()
    if java is None:
        home = os.environ.get("JAVA_HOME")
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on the PATH"
        return f"{JAVA_HINT} ({where})"
    try:
        proc = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{JAVA_HINT} ({java} does not run: {exc})"
    major = java_major(proc.stderr + proc.stdout)
    if proc.returncode != 0:
        return f"{JAVA_HINT} ({java} -version failed)"
    if major is not None and major < JAVA_MINIMUM:
        return f"{JAVA_HINT} (found Java {major} at {java})"
    return None


def problem() -> str | None:
    """The first thing missing for the lab, as the one line to show; None when nothing is."""
    return extra_problem() or java_problem()


def extra_problem() -> str | None:
    """The lab's extra, if some of it is missing, as the one line to show; None when it is installed."""
    missing = missing_extra()
    return f"{EXTRA_HINT} (missing: {', '.join(missing)})" if missing else None

"""What a cluster's executors need to run the lab's tasks, packed the way Spark ships Python dependencies: one
``tar.gz`` holding the ``regroup`` package and every installed distribution it depends on at run time (NumPy,
OR-Tools, kio, RE2, ...; not the driver-only ``lab`` extra: PySpark, matplotlib, confluent-kafka), built from
this interpreter's ``site-packages`` and cached. The session passes it as ``spark.archives``
(``<archive>#regroup-env``): Spark unpacks it into every executor's working directory, and
``spark.executorEnv.PYTHONPATH=regroup-env`` puts it on the Python workers' path. So a worker needs only Spark
and a Python of the driver's minor version on the same platform (PySpark refuses another minor version; the
compiled parts of NumPy and OR-Tools are built for one platform).

The archive is named by a hash of what it holds (Python version, platform, every distribution's name and
version, the bytes of regroup's files), so a change to any of them builds a new one; building takes a few
seconds (about 70 MB). It lives in ``$REGROUP_LAB_CACHE``, else ``$XDG_CACHE_HOME/regroup/lab``, else
``~/.cache/regroup/lab``. No PySpark here.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Final

import regroup

ALIAS: Final = "regroup-env"
#: distributions only the driver needs (the ``lab`` extra and what PySpark brings): never shipped
DRIVER_ONLY: Final = frozenset({"pyspark", "py4j", "matplotlib", "confluent-kafka"})
KEEP: Final = 3  # archives kept in the cache (older ones are removed when a new one is built)


def _key(name: str) -> str:
    """A distribution name normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(dist: metadata.Distribution) -> Iterator[str]:
    """The names of ``dist``'s unconditional requirements and of those whose marker is not about extras."""
    for requirement in dist.requires or []:
        if "extra" in requirement.partition(";")[2]:
            continue
        name = re.split(r"[\s;<>=!~\[(]", requirement.strip(), maxsplit=1)[0]
        if name:
            yield name


def runtime_distributions() -> list[metadata.Distribution]:
    """Every installed distribution regroup needs at run time (its requirements, transitively), sorted by
    name; requirements that are not installed here (a marker excluded them) are left out."""
    try:
        roots = list(_requirement_names(metadata.distribution("regroup")))
    except metadata.PackageNotFoundError:
        raise RuntimeError("regroup's installed metadata was not found (install regroup with pip)") from None
    found: dict[str, metadata.Distribution] = {}
    todo = roots
    while todo:
        name = todo.pop()
        key = _key(name)
        if key in found or key in DRIVER_ONLY or key == "regroup":
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[key] = dist
        todo.extend(_requirement_names(dist))
    return [found[k] for k in sorted(found)]


def _dist_files(dist: metadata.Distribution) -> Iterator[tuple[Path, str]]:
    """(file, name in the archive) for each file a distribution installed into site-packages."""
    for entry in dist.files or []:
        name = entry.as_posix()
        if name.startswith("..") or "__pycache__" in entry.parts or name.endswith(".pyc"):
            continue  # scripts and data outside site-packages, byte code
        path = Path(str(dist.locate_file(entry)))
        if path.is_file():
            yield path, name


def _package_files() -> Iterator[tuple[Path, str]]:
    """The regroup package as it runs here (sources, data and, in a compiled build, its extension modules
    and the shared library they load, which sits beside the package)."""
    root = Path(regroup.__file__).resolve().parent
    compiled = False
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            compiled = compiled or path.suffix in (".so", ".pyd")
            yield path, (Path("regroup") / path.relative_to(root)).as_posix()
    if compiled:
        for lib in sorted(root.parent.glob("*__mypyc*")):
            yield lib, lib.name


def _contents() -> tuple[list[tuple[Path, str]], str]:
    """Every (file, archive name) and the hash naming the archive."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version_info[:2]} {sysconfig.get_platform()} {sysconfig.get_config_var('SOABI')}".encode())
    files: list[tuple[Path, str]] = []
    for dist in runtime_distributions():
        digest.update(f"{_key(dist.metadata['Name'])}=={dist.version}\n".encode())
        files.extend(_dist_files(dist))
    for path, name in _package_files():
        digest.update(name.encode() + b"\0" + path.read_bytes())
        files.append((path, name))
    return files, digest.hexdigest()[:16]


def cache_dir() -> Path:
    explicit = os.environ.get("REGROUP_LAB_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regroup" / "lab"


def archive() -> Path:
    """The archive for this environment, built if the cache does not hold it yet."""
    files, key = _contents()
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    target = folder / f"executor-env-{py}-{key}.tar.gz"
    if target.is_file():
        return target
    fd, tmp = tempfile.mkstemp(prefix=".building-", suffix=".tar.gz", dir=folder)
    os.close(fd)
    try:
        seen: set[str] = set()
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            for path, name in files:
                if name not in seen:
                    seen.add(name)
                    tar.add(path, arcname=name, recursive=False)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _prune(folder, keep=target)
    return target


def _prune(folder: Path, keep: Path) -> None:
    """Remove all but the ``KEEP`` newest archives (``keep`` always stays)."""
    archives = sorted(folder.glob("executor-env-*.tar.gz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        if old != keep:
            old.unlink(missing_ok=True)

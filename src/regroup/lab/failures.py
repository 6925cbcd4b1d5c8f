"""A failed Spark job as one line: what went wrong on the executor, not the JVM's and the Python worker's stack
traces. PySpark raises a ``PythonException`` whose text is the worker's traceback (the last line says what
failed: ``ModuleNotFoundError: No module named 'numpy'``), or a ``Py4JJavaError`` whose Java exception reads
``Job aborted due to stage failure: ... most recent failure: Lost task 1.3 ... (host executor 0): <cause>``.
Nothing here imports PySpark: exceptions are read through their text."""

from __future__ import annotations

import re
from typing import Final

LIMIT: Final = 400  # characters of the line at most
_LOST_TASK: Final = re.compile(r"most recent failure: Lost task .*?\(.*?\): (.*)")
_SQLSTATE: Final = re.compile(r"\s*SQLSTATE: \w+\s*$")


def _text(exc: BaseException) -> str:
    """The exception's text, the Java exception's own when there is one (str() of some PySpark exceptions
    needs the JVM, which may be gone: then the type's name)."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:
            pass
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


def _python_error(text: str) -> str | None:
    """The last line of the last Python traceback in ``text`` (the exception and its message)."""
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    last: str | None = None
    for line in text[start:].splitlines()[1:]:
        if not line.strip() or line.startswith((" ", "\t")):
            continue
        if line.startswith(("During handling", "The above exception")):
            continue
        last = line
        if re.match(r"^\w+(\.\w+)*(Error|Exception|Interrupt|Exit)\b", line):
            break  # the exception line; what follows is the JVM's trace
    return _SQLSTATE.sub("", last) if last else None


def one_line(exc: BaseException) -> str:
    """What made the job fail, in one line."""
    text = _text(exc)
    found = _python_error(text)
    if found is None:
        first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
        lost = _LOST_TASK.search(first)
        found = lost.group(1) if lost else first
        found = found.removeprefix("org.apache.spark.SparkException: ")
    found = " ".join(found.split())
    return found if len(found) <= LIMIT else found[: LIMIT - 1] + "…"

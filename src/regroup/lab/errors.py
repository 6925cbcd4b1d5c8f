"""The one error type of the lab: input the user gave that cannot be used (a grid, an event file, an output
directory). Its message names the file and the problem on one line; the CLI prints it and exits with 2."""

from __future__ import annotations


class LabInputError(ValueError):
    """Bad lab input; ``str(exc)`` is ``<file>: <what is wrong>``."""

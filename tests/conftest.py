"""Settings for the whole suite: hypothesis runs without its per-example deadline. Timing is what benchmarks
measure (`bench/`, docs/benchmarks.md), never unit tests, and on a loaded machine (a parallel run beside the
servers other tests start) one example can take far longer than its next run: a deadline there only makes
the suite flaky."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("regroup", deadline=None)
settings.load_profile("regroup")

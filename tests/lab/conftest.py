"""One local[1] Spark session for the whole test run (JVM start-up is the expensive part), stopped at the
end so no JVM is left behind."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    warnings.filterwarnings("ignore", module="pyspark")
    from regroup.lab import session

    spark = session.start("local[1]", app="regroup-lab-tests", shuffle_partitions=1)
    try:
        yield spark
    finally:
        session.stop(spark)

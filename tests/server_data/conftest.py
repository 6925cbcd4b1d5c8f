from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.helpers import FakeBroker


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TopicStore]:
    with TopicStore.open(tmp_path / "topics", fsync=FsyncPolicy.NEVER) as opened:
        yield opened


@pytest.fixture
def broker(store: TopicStore) -> FakeBroker:
    return FakeBroker(topic_store=store)

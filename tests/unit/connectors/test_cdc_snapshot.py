"""How a snapshot is split among processes: page ranges that cover a table once, and no more
processes than the worker allows (for a snapshot, and for a stream)."""

import itertools
import os

import pytest

from connectors.postgres.snapshot import page_ranges
from connectors.postgres.snapshot_helpers import snapshot_processes
from connectors.postgres.stream_helpers import stream_processes
from connectors.settings import ConnectSettings, PublishSettings
from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("pages", "parts"), [(1000, 2), (1001, 3), (7, 4), (0, 2), (1, 3)])
def test_ranges_cover_every_page_once_and_the_last_is_open(pages: int, parts: int) -> None:
    ranges = page_ranges(pages, parts)
    assert len(ranges) == parts
    assert ranges[0][0] == 0 and ranges[-1][1] is None  # pages added later are read too
    for (_, end), (first, _) in itertools.pairwise(ranges):
        assert end == first  # no gap, no overlap
    covered = [p for first, end in ranges for p in range(first, pages if end is None else end)]
    assert covered == list(range(pages))


def test_shares_are_about_equal() -> None:
    sizes = [end - first for first, end in page_ranges(1000, 3)[:-1] if end is not None]
    assert sizes == [333, 333]
    assert page_ranges(1000, 3)[-1] == (666, None)


def test_a_table_smaller_than_the_processes_is_the_last_share_alone() -> None:
    assert page_ranges(1, 3) == [(0, 0), (0, 0), (0, None)]


def _publishing(most: int) -> PublishSettings:
    return PublishSettings(
        registry=RegistrySettings(database_url="sqlite://"),
        kafka=KafkaSettings(),
        connect=ConnectSettings(max_snapshot_processes=most),
    )


def test_a_connector_file_cannot_take_more_processes_than_the_worker_allows() -> None:
    assert snapshot_processes(32, _publishing(2)) == 2  # cut: the host is shared
    assert snapshot_processes(2, _publishing(4)) == 2
    assert snapshot_processes(1, _publishing(4)) == 1
    assert snapshot_processes(4, None) == 1  # no way to wire helpers: the connector alone


def test_the_worker_allows_its_hosts_cores_by_default() -> None:
    assert ConnectSettings().max_snapshot_processes == (os.cpu_count() or 1)


def test_a_connector_file_cannot_take_more_stream_processes_than_the_worker_allows() -> None:
    publishing = PublishSettings(
        registry=RegistrySettings(database_url="sqlite://"),
        kafka=KafkaSettings(),
        connect=ConnectSettings(max_stream_processes=2),
    )
    assert stream_processes(8, publishing) == 2
    assert stream_processes(2, publishing) == 2
    assert stream_processes(3, None) == 1
    assert ConnectSettings().max_stream_processes == (os.cpu_count() or 1)

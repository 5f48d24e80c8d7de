"""How a snapshot is split among processes: page ranges that cover a table once."""

import itertools

import pytest

from connectors.postgres.snapshot import page_ranges

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

"""Swap requests of reprocessing, and where `hub load plan` finds a bronze table."""

from pathlib import Path

import pytest

from spark_loaders.bronze.reprocess import SwapRequest, SwapRequests, current_location
from spark_loaders.settings import LoaderSettings

pytestmark = pytest.mark.unit


def test_a_request_is_kept_until_a_batch_after_its_swap_batch(tmp_path: Path) -> None:
    swaps = SwapRequests(tmp_path)
    request = SwapRequest("sales.orders", "bronze.sales_orders", "/w/new", {"0": 41}, 42)
    swaps.put(request)
    assert swaps.list() == [request]
    swaps.settle(batch_id=7)  # not applied yet: kept whatever the batch
    assert swaps.list() == [request]
    request.merge_through = 7
    swaps.put(request)
    swaps.settle(batch_id=7)  # the swap batch itself may still be replayed
    assert swaps.list()[0].merge_through == 7
    swaps.settle(batch_id=8)
    assert swaps.list() == []


def test_plan_finds_the_swapped_in_rebuild_not_a_pending_one(tmp_path: Path) -> None:
    settings = LoaderSettings(warehouse_dir=tmp_path / "w", checkpoint_dir=tmp_path / "c")
    managed = tmp_path / "w" / "bronze.db" / "sales_orders"
    assert current_location(settings, "sales.orders") == managed
    rebuilds = tmp_path / "w" / "_rebuilds" / "sales_orders"
    (rebuilds / "20260101T000000Z").mkdir(parents=True)
    (rebuilds / "20260102T000000Z").mkdir()
    pending = SwapRequest(
        "sales.orders", "bronze.sales_orders", str(rebuilds / "20260102T000000Z"), {}, 1
    )
    SwapRequests(settings.checkpoint_dir).put(pending)
    assert current_location(settings, "sales.orders") == rebuilds / "20260101T000000Z"

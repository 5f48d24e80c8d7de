"""The loader's scheduler pools: the file Spark reads defines every pool the code names."""

import xml.etree.ElementTree as ET

from spark_loaders.runtime.scheduling import POOLS_FILE, Pool, session_conf


def _pools() -> dict[str, dict[str, str]]:
    root = ET.parse(POOLS_FILE).getroot()
    return {
        pool.attrib["name"]: {child.tag: (child.text or "").strip() for child in pool}
        for pool in root.iter("pool")
    }


def test_the_pools_file_defines_exactly_the_pools_the_loader_uses() -> None:
    assert set(_pools()) == {pool.value for pool in Pool}


def test_bronze_always_gets_a_core_and_outweighs_the_rest() -> None:
    pools = _pools()
    assert int(pools["bronze"]["minShare"]) >= 1
    weights = {name: int(pool["weight"]) for name, pool in pools.items()}
    assert weights["bronze"] > weights["downstream"] > weights["maintenance"]


def test_sessions_use_the_fair_scheduler_with_the_shipped_file() -> None:
    conf = session_conf()
    assert conf["spark.scheduler.mode"] == "FAIR"
    assert conf["spark.scheduler.allocation.file"] == POOLS_FILE.as_uri()
    assert POOLS_FILE.is_file()

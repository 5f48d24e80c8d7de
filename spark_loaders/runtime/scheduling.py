"""Which of the loader's concurrent work gets the cores first: bronze, then silver and gold,
then table maintenance.

The loader runs the bronze query, the silver queries, the warehouse builds and scheduled
maintenance in one Spark application. Spark's default FIFO scheduler runs jobs in the order
they are submitted, so a bronze batch waited behind whatever OPTIMIZE or gold build was under
way, and its freshness followed the slowest work of the application. With the FAIR scheduler
each kind of work has a pool (`scheduler_pools.xml`): bronze is guaranteed a core whenever it
has tasks (`minShare`) and weighs most, downstream work shares what is left fairly, and
maintenance weighs least. A thread names its pool before it starts a query or runs a job;
a streaming query's own thread keeps the pool of the thread that started it.
"""

from enum import StrEnum, unique
from pathlib import Path

from pyspark.sql import SparkSession

POOLS_FILE = Path(__file__).with_name("scheduler_pools.xml")
POOL_PROPERTY = "spark.scheduler.pool"


@unique
class Pool(StrEnum):
    """The pools of `scheduler_pools.xml`."""

    BRONZE = "bronze"
    DOWNSTREAM = "downstream"
    MAINTENANCE = "maintenance"


def session_conf() -> dict[str, str]:
    """The FAIR scheduler with the loader's pools; read by the driver only."""
    return {
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": POOLS_FILE.as_uri(),
    }


def use_pool(spark: SparkSession, pool: Pool) -> None:
    """Jobs of the calling thread, and queries it starts from now on, run in `pool`."""
    spark.sparkContext.setLocalProperty(POOL_PROPERTY, pool.value)

"""How a connector process collects garbage: start-up's objects frozen, collections rarer.

The connector process and the helper processes of a source (`connectors.postgres.helpers`)
settle their collector the same way, once start-up is done.
"""

import gc
import logging

from connectors.settings import ConnectSettings

log = logging.getLogger(__name__)


def settle_garbage_collector(settings: ConnectSettings) -> None:
    """Leave the objects of start-up out of garbage collection, and collect less often.

    A connector holds thousands of records, each a few dicts, until Kafka acknowledges them.
    They outlive the youngest generation, so with CPython's defaults the collector ran again
    and again, promoting them and walking the older generations, start-up's objects included
    (the imported libraries, the settings, the registry's caches): about a third of the time
    to decode a CDC change. Start-up's objects live as long as the process, so `gc.freeze`
    leaves them out of every collection, and a larger youngest threshold
    (`HUB_CONNECT_GC_THRESHOLD`) makes collections rarer, as `hub api serve` does; cyclic
    garbage is still collected, only later.
    """
    if settings.gc_threshold:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(settings.gc_threshold, older, oldest)
    gc.collect()
    gc.freeze()
    log.info("garbage collection: %d start-up objects frozen, youngest threshold %d",
             gc.get_freeze_count(), gc.get_threshold()[0])  # fmt: skip

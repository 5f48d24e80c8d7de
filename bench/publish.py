"""Publish gateway benchmark: records per second over HTTP against the in-process ceiling.

    .venv/bin/python bench/publish.py [--quick] [--batches 1,100,500,1000] [--clients 1,2,4,8]
                                      [--repeats 3] [--duration S] [--profile]

Starts its own Kafka broker (the jars of `make jars`) and `hub api serve` as a separate process,
both on free ports of 127.0.0.1, creates a feed, then measures, in rounds that interleave them:

- the ceiling: one confluent-kafka producer in this process, configured as the gateway's
  (idempotent, acks=all, the same linger and compression), producing the same records encoded
  with fastavro and framed with the 5-byte Confluent header: no HTTP, no validation;
- the gateway: closed-loop clients POSTing batches of the same records as natural JSON.

It prints the medians of the rounds with the ratio to the ceiling, and PASS/FAIL for the target
"at batches of 500 or more the gateway reaches at least half the ceiling". See bench/README.md.
"""

import sys
from pathlib import Path


def _main() -> int:
    from bench.publish_bench import main

    return main()


if __name__ == "__main__":
    if not __package__:
        # Run as a file, Python puts bench/ first on sys.path, where bench/registry.py would
        # hide the `registry` package; the repository root goes there instead.
        sys.path[0] = str(Path(__file__).resolve().parents[1])
    sys.exit(_main())

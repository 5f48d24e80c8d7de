"""Schema registry benchmark: lookups and registrations against the ceiling of the same server.

    .venv/bin/python bench/registry.py [--quick] [--duration S] [--clients 4,8,16]
                                        [--databases sqlite,postgresql] [--profile]

See bench/README.md for what it prints; the work is in bench/registry_bench.py.
"""

import sys
from pathlib import Path


def _main() -> int:
    from bench.registry_bench import main

    return main()


if __name__ == "__main__":
    if not __package__:
        # Run as a file, Python puts bench/ first on sys.path, where this file's name would
        # hide the `registry` package; the repository root goes there instead.
        sys.path[0] = str(Path(__file__).resolve().parents[1])
    sys.exit(_main())

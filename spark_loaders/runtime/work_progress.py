"""How a long operation tells whoever runs it how far it is: the step under way, and how many
units of work are done of how many.

The operations the `hub` command runs to their end (a replay, a reprocessing rebuild, a
warehouse build, a table's maintenance) take a `WorkProgress` and call it as each step starts,
and once more with `done == total` when the last has finished. The units are what the
operation truly counts: tables, silver streams, the steps of a fixed sequence. `hub_cli` draws
the calls as a progress bar; the running loader and its control port, which run the same
operations, pass nothing and hear nothing (`no_progress`).
"""

from typing import Protocol


class WorkProgress(Protocol):
    """Told of each step of a long operation."""

    def __call__(self, step: str, done: int, total: int | None, /) -> None:
        """`step` starts after `done` units of `total` (None: not known) have finished."""


def no_progress(step: str, done: int, total: int | None, /) -> None:
    """Hear nothing: the default of every operation that reports its progress."""

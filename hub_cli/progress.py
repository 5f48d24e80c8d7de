"""The progress of a long `hub` command, drawn with rich on stderr.

`hub load replay`, `hub load reprocess`, `hub load maintain` and `hub warehouse build` hand a
`ProgressBar` to the operation they run, which calls it as each step starts
(`spark_loaders.runtime.work_progress`): one line with the step, a bar, how many units are done
of how many, and the time elapsed.

The bar is drawn only while stderr is a terminal, so a command whose stderr goes to a file or a
pipe writes what it wrote before; stdout, which scripts read, gets none of it. While it is drawn,
log lines, and stdout's lines when stdout is the terminal too, are printed above the bar rather
than across it (a line written past the bar would leave a piece of the bar in the scrollback).
"""

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class ProgressBar:
    """One line of progress: the step under way, done of total, time elapsed."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: TaskID | None = None
        self._counted = False

    def __call__(self, step: str, done: int, total: int | None, /) -> None:
        """`step` starts after `done` units of `total` (None: not known) have finished."""
        counted = total is not None
        if self._task is not None and counted == self._counted:
            self._progress.update(self._task, description=step, completed=done, total=total)
            return
        # rich cannot set a task's total back to unknown: a count that becomes unknown, or
        # known, starts the line afresh.
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(step, total=total, completed=done)
        self._counted = counted

    def echo(self, line: str) -> None:
        """Print `line` on stdout: above the bar when stdout is the terminal it is drawn on."""
        # Written to `sys.stdout` as it is now, rich's stand-in while the bar is drawn: click's
        # own default stream goes around the stand-in, straight across the bar.
        typer.echo(line, file=sys.stdout)

    def within(self, done: int, total: int) -> Callable[[str, int, int | None], None]:
        """A callback for the steps of one unit of this bar's count: it shows their names
        while the bar goes on counting `done` of `total`."""

        def show(step: str, _done: int, _total: int | None, /) -> None:
            self(step, done, total)

        return show


@contextmanager
def progress_bar(
    *, show_progress: bool | None = None, console: Console | None = None
) -> Iterator[ProgressBar]:
    """A progress bar for the block, on `console` (stderr); shown when `show_progress`, by
    default while the console writes to a terminal."""
    console = console or Console(stderr=True)
    if show_progress is None:
        show_progress = _is_terminal(console.file)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    # stdout is taken through the display only when it shows on the terminal anyway: a file or
    # a pipe gets every byte the command prints, and none of the bar.
    with (
        Progress(
            *columns,
            console=console,
            disable=not show_progress,
            redirect_stdout=_is_terminal(sys.stdout),
        ) as progress,
        _logs_above_the_bar(),
    ):
        yield ProgressBar(progress)


@contextmanager
def _logs_above_the_bar() -> Iterator[None]:
    """Log handlers writing to stderr write through the display's stand-in for it, which prints
    above the bar, while the bar is drawn (rich replaces `sys.stderr` only then; a handler
    keeps the stream it was given)."""
    stand_in = sys.stderr
    stderr = getattr(stand_in, "rich_proxied_file", None)
    handlers = [
        handler
        for handler in logging.getLogger().handlers
        if stderr is not None
        and isinstance(handler, logging.StreamHandler)
        and handler.stream is stderr
    ]
    for handler in handlers:
        handler.setStream(stand_in)
    try:
        yield
    finally:
        for handler in handlers:
            handler.setStream(stderr)


def _is_terminal(file: IO[str]) -> bool:
    try:
        return file.isatty()
    except ValueError:  # closed
        return False

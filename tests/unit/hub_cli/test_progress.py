"""The progress bar of the long `hub` commands: what it shows of the steps it is told of, and
that it stays on stderr, and off it when stderr is not a terminal."""

import io
import logging
import sys
from collections.abc import Iterator

import pytest
from rich.console import Console
from rich.progress import Progress

from hub_cli.progress import ProgressBar, progress_bar

pytestmark = pytest.mark.unit


def _terminal() -> tuple[Console, io.StringIO]:
    screen = io.StringIO()
    return Console(file=screen, force_terminal=True, width=120), screen


def test_the_bar_shows_the_last_step_and_its_units_done_of_total() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=False, width=120)

    with progress_bar(show_progress=True, console=console) as bar:
        bar("building gold.dim_customer", 0, 3)
        bar("building gold.fact_orders", 2, 3)
        bar("built 3 of 3 tables", 3, 3)

    # A console that is no terminal gets the bar once, as it ends.
    assert "built 3 of 3 tables" in screen.getvalue()
    assert "3/3" in screen.getvalue()
    assert "building" not in screen.getvalue()


def test_a_unit_s_own_steps_are_named_while_the_bar_counts_units() -> None:
    progress = Progress(disable=True)
    bar = ProgressBar(progress)

    bar.within(3, 4)("VACUUM bronze.shop_orders", 1, 2)

    [task] = progress.tasks
    assert (task.description, task.completed, task.total) == ("VACUUM bronze.shop_orders", 3, 4)


def test_a_count_that_becomes_unknown_is_shown_as_unknown() -> None:
    progress = Progress(disable=True)
    bar = ProgressBar(progress)

    bar("landing records", 1, 3)
    bar("waiting for the stream", 0, None)

    [task] = progress.tasks
    assert (task.description, task.completed, task.total) == ("waiting for the stream", 0, None)


def test_nothing_is_written_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with progress_bar() as bar:  # stderr is pytest's capture: no terminal
        bar("reading quarantine.shop_orders", 0, 3)
        bar("replayed 10 records of quarantine.shop_orders", 3, 3)

    assert capsys.readouterr() == ("", "")


def test_stdout_keeps_its_lines_while_the_bar_is_drawn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    console, screen = _terminal()

    with progress_bar(show_progress=True, console=console) as bar:
        bar("OPTIMIZE bronze.shop_orders", 0, 2)
        bar.echo("bronze.shop_orders: maintaining ...")

    assert capsys.readouterr().out == "bronze.shop_orders: maintaining ...\n"
    assert "maintaining" not in screen.getvalue()
    assert "OPTIMIZE bronze.shop_orders" in screen.getvalue()


class _TerminalStdout(io.TextIOWrapper):
    def isatty(self) -> bool:
        return True


def test_stdout_on_the_terminal_of_the_bar_is_printed_above_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written = io.BytesIO()
    stdout = _TerminalStdout(written, encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stdout)
    console, screen = _terminal()

    with progress_bar(show_progress=True, console=console) as bar:
        bar("OPTIMIZE bronze.shop_orders", 0, 2)
        bar.echo("bronze.shop_orders: maintaining ...")

    stdout.flush()
    assert written.getvalue() == b""
    assert "bronze.shop_orders: maintaining ..." in screen.getvalue()


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, given back as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield root
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_log_lines_go_above_a_drawn_bar_and_the_log_gets_stderr_back_after(
    root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    stderr = sys.stderr
    handler = logging.StreamHandler(stderr)  # as `hub` configures its log: stderr alone
    root_logger.handlers[:] = [handler]
    root_logger.setLevel(logging.INFO)
    console, screen = _terminal()

    with progress_bar(show_progress=True, console=console) as bar:
        bar("building gold.dim_customer", 0, 2)
        logging.getLogger("spark_loaders").info("dimension customer refreshed")

    assert "dimension customer refreshed" in screen.getvalue()
    assert handler.stream is stderr
    logging.getLogger("spark_loaders").info("after the bar")
    assert capsys.readouterr().err == "after the bar\n"

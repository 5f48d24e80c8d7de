"""The ADR index lists every record once, and every record has one status line.

`docs/adr/README.md` groups the records by topic, one table row per record. Each record
(`docs/adr/NNNN-*.md`) has, right under its title, one line `Status: Accepted` (or `Proposed`,
`Deprecated`, `Superseded by [ADR NNNN](...)`), followed by `; amends` or `; amended by` and links
to the records concerned when one record changes part of another. A record added without its row,
a row naming a record that does not exist, or a record without that line fails here.
"""

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

ADR = REPO / "docs" / "adr"
INDEX = ADR / "README.md"

_RECORD_NAME = re.compile(r"^(\d{4})-[a-z0-9.-]+\.md$")
_ROW = re.compile(r"^\| \[(?P<number>\d{4})\]\((?P<file>[^)]+)\) \| .+ \| (?P<status>[^|]+) \|$")
_LINK = re.compile(r"\[ADR (?P<number>\d{4})\]\((?P<file>[^)]+)\)")
_STATUS = re.compile(
    r"^Status: (?P<state>Accepted|Proposed|Deprecated|Superseded by \[ADR \d{4}\]\([^)]+\))"
    r"(?:; (?:amends|amended by) \[ADR \d{4}\]\([^)]+\).*)?$"
)


class Row(NamedTuple):
    """One row of the index: the record's number and file as linked, and its status cell."""

    line: int
    number: str
    file: str
    status: str


def _records() -> list[Path]:
    return sorted(p for p in ADR.glob("*.md") if _RECORD_NAME.match(p.name))


def _rows() -> list[Row]:
    rows = []
    for number, line in enumerate(INDEX.read_text().splitlines(), start=1):
        found = _ROW.match(line)
        if found:
            rows.append(Row(number, found["number"], found["file"], found["status"].strip()))
    return rows


def _status_line(record: Path) -> str:
    """The line right under the record's title (and the blank line after the title)."""
    lines = record.read_text().splitlines()
    assert len(lines) > 3 and lines[0].startswith("# "), f"{record.name}: no title line first"
    assert lines[1] == "", f"{record.name}: the title is not followed by a blank line"
    return lines[2]


def test_the_records_and_the_index_are_found() -> None:
    assert len(_records()) >= 60
    assert len(_rows()) >= 60


def test_every_record_is_listed_in_the_index_exactly_once() -> None:
    listed = [row.file for row in _rows()]
    twice = sorted({name for name in listed if listed.count(name) > 1})
    missing = sorted(p.name for p in _records() if p.name not in listed)
    assert twice == [], f"docs/adr/README.md lists these records more than once: {twice}"
    assert missing == [], f"docs/adr/README.md does not list: {missing}"


def test_every_row_of_the_index_names_a_record_that_exists_under_its_number() -> None:
    problems = []
    for row in _rows():
        named = _RECORD_NAME.match(row.file)
        if not (ADR / row.file).is_file():
            problems.append(f"README.md:{row.line}: {row.file} does not exist")
        elif named is None or named[1] != row.number:
            problems.append(f"README.md:{row.line}: [{row.number}] links {row.file}")
    assert problems == []


def test_every_row_sits_under_a_topic_heading() -> None:
    lines = INDEX.read_text().splitlines()
    first_topic = next(n for n, line in enumerate(lines, start=1) if line.startswith("## "))
    early = [row.line for row in _rows() if row.line < first_topic]
    assert early == [], f"rows before the first topic heading, at lines {early}"


@pytest.mark.parametrize("record", _records(), ids=lambda p: p.name[:4])
def test_every_record_has_one_status_line_right_under_its_title(record: Path) -> None:
    status = _status_line(record)
    assert _STATUS.match(status), f"{record.name}: line 3 is not a status line: {status!r}"
    lines = record.read_text().splitlines()
    assert lines[3] == "", f"{record.name}: the status line goes on: {lines[3]!r}"
    others = [
        n
        for n, line in enumerate(lines, start=1)
        if n != 3 and (line.startswith("Status:") or line.strip().lower() == "## status")
    ]
    assert others == [], f"{record.name}: another status at lines {others}"


@pytest.mark.parametrize("record", _records(), ids=lambda p: p.name[:4])
def test_the_records_a_status_line_links_exist(record: Path) -> None:
    for link in _LINK.finditer(_status_line(record)):
        named = _RECORD_NAME.match(link["file"])
        assert (ADR / link["file"]).is_file(), f"{record.name}: {link['file']} does not exist"
        assert named is not None and named[1] == link["number"], (
            f"{record.name}: ADR {link['number']} links {link['file']}"
        )


def test_the_index_gives_each_record_the_status_its_file_has() -> None:
    problems = []
    for row in _rows():
        record = ADR / row.file
        if not record.is_file():
            continue  # reported by the test of the rows
        status = _status_line(record)
        found = _STATUS.match(status)
        if found is None:
            continue  # reported by the test of the status lines
        # "Superseded by [ADR 0070](...)" is "Superseded by 0070" in the index.
        state = found["state"].split(" [", 1)[0]
        named_in_file = {link["number"] for link in _LINK.finditer(status)}
        named_in_index = set(re.findall(r"\b\d{4}\b", row.status))
        if not row.status.startswith(state) or named_in_file != named_in_index:
            problems.append(f"README.md:{row.line}: {row.status!r}, but {row.file}: {status!r}")
    assert problems == []

"""Log lines into records, and following files across rotation and truncation (no Kafka)."""

import os
from pathlib import Path
from typing import Any

import pytest

from connectors.errors import UnparseableRecord
from connectors.logfile.config import LogfileSource
from connectors.logfile.formats import LineParser
from connectors.logfile.tail import Tailer

pytestmark = pytest.mark.unit


def _parser(**source: Any) -> LineParser:
    return LineParser(LogfileSource.model_validate({"paths": ["x.log"], **source}))


def test_apache_common_lines_become_typed_records() -> None:
    record = _parser(format="apache_common").parse(
        '192.0.2.1 - - [01/Feb/2025:00:00:01 +0000] "POST /api/cart HTTP/2.0" 201 -'
    )
    assert record == {
        "remote_host": "192.0.2.1",
        "ident": "-",
        "remote_user": "-",
        "time": "2025-02-01T00:00:01+00:00",
        "method": "POST",
        "path": "/api/cart",
        "protocol": "HTTP/2.0",
        "status": 201,
        "bytes": None,
    }


def test_nginx_combined_lines_keep_referer_and_agent() -> None:
    record = _parser(format="nginx_combined").parse(
        '198.51.100.7 - bob [10/Oct/2024:13:55:36 -0700] "GET /a?b=1 HTTP/1.1" 404 153 '
        '"-" "curl/8.5.0"'
    )
    assert record["status"] == 404
    assert record["body_bytes_sent"] == 153
    assert record["http_user_agent"] == "curl/8.5.0"
    assert record["time_local"] == "2024-10-10T13:55:36-07:00"


def test_json_lines_map_fields_and_name_what_is_wrong() -> None:
    parser = _parser(
        format="json",
        fields={"level": {"required": True}, "took": {"type": "double", "source": "ms"}},
    )
    assert parser.parse('{"level": "info", "ms": 12, "other": true}') == {
        "level": "info",
        "took": 12.0,
    }
    with pytest.raises(UnparseableRecord, match="not valid JSON"):
        parser.parse("{oops")
    with pytest.raises(UnparseableRecord, match="'level' is required"):
        parser.parse('{"ms": 1}')
    with pytest.raises(UnparseableRecord, match="'took': 'slow' is not a valid double"):
        parser.parse('{"level": "info", "ms": "slow"}')


def _lines(tailer: Tailer) -> list[bytes]:
    return [line for chunk in tailer.poll(100) for line in chunk.lines]


def test_rename_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"a\nb\n")
    tailer = Tailer([str(log)], stored={}, start_at_end=False, max_line_bytes=100)
    assert _lines(tailer) == [b"a", b"b"]
    log.rename(tmp_path / "app.log.1")
    with (tmp_path / "app.log.1").open("ab") as old:
        old.write(b"c\n")
    log.write_bytes(b"d\n")
    assert sorted(_lines(tailer)) == [b"c", b"d"]
    assert _lines(tailer) == []


def test_a_line_written_to_a_rotated_file_after_a_look_is_read_within_rotate_wait(
    tmp_path: Path,
) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"a\n")
    tailer = Tailer([str(log)], stored={}, start_at_end=False, max_line_bytes=100,
                    rotate_wait_s=60)  # fmt: skip
    assert _lines(tailer) == [b"a"]
    log.rename(tmp_path / "app.log.1")
    assert _lines(tailer) == []  # a look between the rename and the writer's last line
    with (tmp_path / "app.log.1").open("ab") as old:
        old.write(b"late\n")
    assert _lines(tailer) == [b"late"]

    gone = Tailer([str(tmp_path / "app.log.1")], stored={}, start_at_end=False,
                  max_line_bytes=100, rotate_wait_s=0)  # fmt: skip
    assert _lines(gone) == [b"a", b"late"]
    (tmp_path / "app.log.1").rename(tmp_path / "app.log.2")
    assert _lines(gone) == [] and gone.unread() == {}  # no wait: closed at once


def test_copytruncate_starts_over_and_partial_lines_wait(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"first line\nsecond\n")
    tailer = Tailer([str(log)], stored={}, start_at_end=False, max_line_bytes=100)
    assert _lines(tailer) == [b"first line", b"second"]
    os.truncate(log, 0)
    log.write_bytes(b"new\npart")
    assert _lines(tailer) == [b"new"]
    with log.open("ab") as handle:
        handle.write(b"ial\n")
    assert _lines(tailer) == [b"partial"]


def test_a_stored_position_resumes_only_the_same_file(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"one\ntwo\n")
    first = Tailer([str(log)], stored={}, start_at_end=False, max_line_bytes=100)
    [chunk] = first.poll(1)
    first.close()
    with log.open("ab") as handle:
        handle.write(b"three\n")
    resumed = Tailer(
        [str(log)], stored={chunk.partition["file"]: chunk.position}, start_at_end=False,
        max_line_bytes=100,
    )  # fmt: skip
    assert _lines(resumed) == [b"two", b"three"]
    # The same inode with other first bytes is another file: read from its start.
    log.write_bytes(b"other content\n")
    stranger = Tailer(
        [str(log)], stored={chunk.partition["file"]: chunk.position}, start_at_end=False,
        max_line_bytes=100,
    )  # fmt: skip
    assert _lines(stranger) == [b"other content"]


def test_unread_bytes_follow_each_file_under_its_current_path(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"a\nb\npart")
    tailer = Tailer([str(log)], stored={}, start_at_end=False, max_line_bytes=100)
    assert tailer.unread() == {}  # nothing followed before the first look
    assert _lines(tailer) == [b"a", b"b"]
    assert tailer.unread() == {str(log): len(b"part")}
    with log.open("ab") as handle:
        handle.write(b"ial\nmore\n")
    assert tailer.unread() == {str(log): len(b"partial\nmore\n")}
    log.rename(tmp_path / "app.log.1")
    log.write_bytes(b"new\n")
    # The rotated file, out of the glob, still counts under its old path, beside its successor.
    assert tailer.unread() == {str(log): len(b"partial\nmore\n")}
    assert sorted(_lines(tailer)) == [b"more", b"new", b"partial"]
    assert tailer.unread() == {str(log): 0}
    assert _lines(tailer) == []
    assert tailer.unread() == {str(log): 0}  # the rotated file, read to its end, is dropped

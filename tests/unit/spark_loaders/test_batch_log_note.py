"""The bronze batch log line says how many records of a topic landed and how many went to
quarantine, so that an operator reading `<- 3 records` is not told they all landed."""

import pytest

from spark_loaders.bronze.loader import landing_note

pytestmark = pytest.mark.unit


def test_a_batch_whose_records_were_all_quarantined_says_none_landed() -> None:
    assert landing_note(3, 3) == "3 records: 0 landed, 3 quarantined"


def test_a_batch_split_between_bronze_and_quarantine_gives_both_counts() -> None:
    assert landing_note(5, 2) == "5 records: 3 landed, 2 quarantined"
    assert landing_note(4, 0) == "4 records: 4 landed"


def test_a_redone_batch_counts_only_what_delta_did_not_hold_already() -> None:
    note = landing_note(2, 1, redone=True)
    assert note == "2 records more than Delta held already: 1 landed, 1 quarantined"


def test_a_refused_table_change_names_the_reason() -> None:
    note = landing_note(2, 2, why="TYPE_CHANGE_UNSUPPORTED: amount: long -> string")
    assert note.endswith(
        "0 landed, 2 quarantined (TYPE_CHANGE_UNSUPPORTED: amount: long -> string)"
    )

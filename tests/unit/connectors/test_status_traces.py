"""Connector status for readers other than the owner: states and codes, never traces."""

from typing import Any

import pytest

from connectors.control import without_traces

pytestmark = pytest.mark.unit

STATUS: dict[str, Any] = {
    "name": "erp-orders",
    "type": "source",
    "connector": {"state": "FAILED", "worker_id": "w1", "trace": "secret-host:5432 refused"},
    "tasks": [
        {
            "id": 0,
            "state": "FAILED",
            "worker_id": "w1",
            "error_code": 50331,
            "trace": "Traceback ... connecting to secret-host:5432",
            "retry": {"attempts": 3, "last_error": "secret-host down", "last_error_code": 50331},
        }
    ],
}


def test_traces_and_retry_errors_give_way_to_a_short_coded_message() -> None:
    public = without_traces(STATUS, owner="erp")

    assert "secret-host" not in str(public)
    [task] = public["tasks"]
    assert task["state"] == "FAILED"
    assert task["error_code"] == 50331
    assert task["retry"] == {"attempts": 3, "last_error_code": 50331}
    assert "50331" in task["message"] and "'erp'" in task["message"]
    assert public["connector"]["state"] == "FAILED"


def test_the_owners_status_is_left_as_it_was() -> None:
    without_traces(STATUS, owner="erp")

    assert "trace" in STATUS["tasks"][0]  # a copy was changed, not the answer of the owner

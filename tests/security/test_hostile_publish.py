"""Hostile publishers and callers against the real API: forged lineage headers are refused on
every door that takes headers, credentials that are no key are refused at once on public reads
too, and a slow stream of large records does not keep the API from answering."""

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.security.conftest import TIMEOUT, Hub, running_hub
from tests.support.hub_client import bearer
from tests.support.kafka import read_all

pytestmark = pytest.mark.security

OWNER = "sec_b"
FORGED = "forged-by-a-publisher"
# Names a reader could take for the hub's: the loader reads `hub.request-id` and
# `hub.idempotency-key` into the lineage columns of every table.
RESERVED = ["hub.request-id", "hub.idempotency-key", "HUB.Request-Id", "Hub.cdc.unchanged-columns"]


@pytest.fixture(scope="module")
def hub(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = f"sqlite:///{tmp_path_factory.mktemp('hostile_publish') / 'hub.db'}"
    with running_hub(database_url=database, bootstrap=kafka_bootstrap) as hub:
        yield hub


def _order(n: int, size: int = 0) -> dict[str, Any]:
    return {"id": f"{n}-{'x' * size}" if size else str(n), "cents": n}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _v3(hub: Hub, content: Any, **params: str) -> httpx.Response:
    topic = hub.teams[OWNER].topic
    return httpx.post(
        f"{hub.url}/v3/clusters/hub/topics/{topic}/records",
        params=params,
        content=content,
        headers={**hub.headers(OWNER), "Content-Type": "application/json"},
        timeout=httpx.Timeout(120),
    )


def _request_ids(hub: Hub) -> list[list[bytes]]:
    """The `hub.request-id` headers of each record the owner's feed holds."""
    topic = hub.teams[OWNER].topic
    feed = httpx.get(f"{hub.url}/v1/feeds/{topic}", timeout=TIMEOUT).json()
    stored = read_all(hub.bootstrap, topic, expected=sum(feed["end_offsets"].values()))
    return [[v for k, v in (m.headers() or []) if k == "hub.request-id"] for m in stored]


# Reserved record headers


@pytest.mark.parametrize("name", RESERVED)
def test_a_feeds_api_record_with_a_hub_header_is_refused_alone_and_the_rest_publish(
    hub: Hub, name: str
) -> None:
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    records = [
        {"value": _order(1)},
        {"value": _order(2), "headers": {"source": "web", name: FORGED}},
        {"value": _order(3), "headers": {"source": "web"}},
    ]

    answer = httpx.post(
        f"{hub.url}/v1/feeds/{hub.teams[OWNER].topic}/records",
        json={"records": records},
        headers={**hub.headers(OWNER), "X-Request-Id": request_id},
        timeout=TIMEOUT,
    )

    assert answer.status_code == 207, answer.text
    results = answer.json()["results"]
    assert [r.get("error_code") for r in results] == [None, 42231, None]
    assert results[1]["path"] == "$.headers"
    assert "starting with 'hub.' (in any case) are reserved" in results[1]["message"]
    stored = _request_ids(hub)
    assert stored.count([request_id.encode()]) == 2  # each record holds the hub's id alone
    assert all(len(ids) == 1 and ids != [FORGED.encode()] for ids in stored)


def test_a_v3_record_with_a_hub_header_is_refused_in_its_place_in_the_stream(hub: Hub) -> None:
    forged = [
        {"value": {"data": _order(11)}, "headers": [{"name": name, "value": _b64(FORGED)}]}
        for name in RESERVED
    ]
    records = [{"value": {"data": _order(10)}}, *forged, {"value": {"data": _order(12)}}]

    answer = _v3(hub, "\n".join(json.dumps(r) for r in records), on_error="reject")

    assert answer.status_code == 200, answer.text
    codes = [json.loads(line)["error_code"] for line in answer.text.splitlines()]
    assert codes == [200, *[42231] * len(RESERVED), 200]
    assert all(len(ids) == 1 and ids != [FORGED.encode()] for ids in _request_ids(hub))


def test_the_rest_proxy_v2_takes_no_record_headers_at_all(hub: Hub) -> None:
    answer = httpx.post(
        f"{hub.url}/topics/{hub.teams[OWNER].topic}",
        json={
            "value_schema_id": 1,
            "records": [{"value": _order(20), "headers": {"hub.request-id": FORGED}}],
        },
        headers={**hub.headers(OWNER), "Content-Type": "application/vnd.kafka.avro.v2+json"},
        timeout=TIMEOUT,
    )

    assert 400 <= answer.status_code < 500
    assert "headers" in answer.json()["message"]


# Credentials that are no key

PUBLIC_READS = ["/v1/feeds", "/subjects", "/config", "/v1/feeds/{topic}"]
NO_KEYS = {
    "30kb-bearer": {"Authorization": "Bearer " + "k" * 30_000},
    "wrong-alphabet": {"Authorization": "Bearer hub_0123456789ab_" + "*" * 43},
    "other-scheme": {"Authorization": "Digest username=x"},
    "never-issued": bearer("hub_0123456789ab_" + "A" * 43),
}


@pytest.mark.parametrize("path", PUBLIC_READS)
@pytest.mark.parametrize("headers", NO_KEYS.values(), ids=NO_KEYS.keys())
def test_credentials_that_are_no_key_get_401_on_public_reads_and_no_key_reads(
    hub: Hub, path: str, headers: dict[str, str]
) -> None:
    url = hub.url + path.format(topic=hub.teams[OWNER].topic)

    refused = httpx.get(url, headers=headers, timeout=TIMEOUT)

    assert (refused.status_code, refused.json()["error_code"]) == (401, 40101)
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert "k" * 100 not in refused.text  # the token is never echoed
    assert httpx.get(url, timeout=TIMEOUT).status_code == 200
    assert httpx.get(url, headers=hub.headers("sec_a"), timeout=TIMEOUT).status_code == 200


def test_a_write_with_credentials_that_are_no_key_gets_401_and_changes_nothing(
    hub: Hub,
) -> None:
    before = hub.snapshot(OWNER)

    answer = httpx.post(
        f"{hub.url}/v1/feeds/{hub.teams[OWNER].topic}/records",
        json={"records": [{"value": _order(30)}]},
        headers=NO_KEYS["30kb-bearer"],
        timeout=TIMEOUT,
    )

    assert (answer.status_code, answer.json()["error_code"]) == (401, 40101)
    assert hub.snapshot(OWNER) == before


# A slow stream of large records


def test_a_megabyte_streamed_in_small_chunks_is_answered_while_the_api_stays_live(
    hub: Hub,
) -> None:
    # Ten records of about 100 KB: each is pending across some 25 chunks of 4 KiB.
    records = [{"value": {"data": _order(n, size=100_000)}} for n in range(40, 50)]
    body = "\n".join(json.dumps(r) for r in records).encode()
    assert len(body) > 1_000_000
    chunks = [body[start : start + 4096] for start in range(0, len(body), 4096)]
    live: list[int] = []

    def stream() -> Iterator[bytes]:
        for number, chunk in enumerate(chunks):
            if number == len(chunks) // 2:
                # Half the body sent, the rest to come: the API answers others meanwhile.
                live.append(httpx.get(f"{hub.url}/livez", timeout=TIMEOUT).status_code)
                live.append(httpx.get(f"{hub.url}/healthz", timeout=TIMEOUT).status_code)
            yield chunk

    answer = _v3(hub, stream())

    assert live == [200, 200]
    assert answer.status_code == 200, answer.text[:500]
    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [r["error_code"] for r in reports] == [200] * len(records)


def test_a_streamed_record_over_the_size_limit_is_refused_in_its_place(hub: Hub) -> None:
    records = [
        {"value": {"data": _order(60)}},
        {"value": {"data": _order(61, size=1_100_000)}},  # over HUB_KAFKA_MAX_RECORD_BYTES
        {"value": {"data": _order(62)}},
    ]
    body = "".join(json.dumps(r) for r in records).encode()

    answer = _v3(hub, (body[start : start + 65536] for start in range(0, len(body), 65536)))

    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [r["error_code"] for r in reports] == [200, 41302, 200]
    assert "HUB_KAFKA_MAX_RECORD_BYTES" in reports[1]["message"]

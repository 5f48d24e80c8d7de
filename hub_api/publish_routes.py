"""The publish gateway: records in as natural JSON, out to Kafka as framed Avro."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from hub_api.deps import PublisherDep, Settings
from hub_api.errors import error_response
from hub_api.publish_models import PublishPublic, RecordResultPublic, RecordsIn
from hub_kafka.publish import IncomingRecord
from hub_kafka.topics import topic_name
from registry.errors import ErrorCode

router = APIRouter(prefix="/v1", tags=["publish"])


@router.post("/feeds/{topic}/records", response_model=PublishPublic)
def publish_records(
    topic: str, body: RecordsIn, publisher: PublisherDep, settings: Settings
) -> JSONResponse:
    """Publish records to a feed. Each record's result comes back after Kafka acknowledged it.

    200 when every record was accepted; 207 when some were, with each result saying which;
    the error status of the first failure when none was.
    """
    if len(body.records) > settings.max_records_per_request:
        return error_response(
            ErrorCode.MALFORMED_REQUEST,
            f"{len(body.records)} records in one request; the most allowed is "
            f"{settings.max_records_per_request} (HUB_API_MAX_RECORDS_PER_REQUEST).",
        )
    outcome = publisher.publish(
        topic_name(topic), [IncomingRecord(key=r.key, value=r.value) for r in body.records]
    )
    results = [
        RecordResultPublic(
            partition=r.partition,
            offset=r.offset,
            error_code=int(r.error_code) if r.error_code is not None else None,
            message=r.message,
            path=r.path,
        )
        for r in outcome.results
    ]
    accepted = sum(1 for r in outcome.results if r.ok)
    answer = PublishPublic(
        topic=topic,
        schema_id=outcome.schema_id,
        accepted=accepted,
        rejected=len(results) - accepted,
        results=results,
    )
    if accepted == len(results):
        status = 200
    elif accepted:
        status = 207
    else:
        first = next(r.error_code for r in outcome.results if r.error_code is not None)
        status = first.http_status
    headers = {"Retry-After": "5"} if status == 503 else None
    return JSONResponse(answer.model_dump(exclude_none=True), status_code=status, headers=headers)

"""The console's Lineage page: a row, or a source position, traced by `LineageService`.

The page asks the service exactly what `GET /v1/lineage/rows` and `/v1/lineage/positions` ask
it, with the signed-in caller, so it answers and refuses as those routes do; what it adds is
reading the two forms and putting the answer in the words a person looks for.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from catalog.errors import InvalidLineageQuery
from catalog.types import Principal
from hub_api.lineage_models import (
    BronzeCommitPublic,
    PositionsPublic,
    RowLineagePublic,
    TableVersionPublic,
)
from hub_api.lineage_service import LineageService
from hub_core.errors import HubError
from registry.service import RegistryService
from registry.types import SchemaId

Find = Literal["row", "position"]
_INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LineageForm:
    """What the two forms hold, as given (shown again above the answer)."""

    find: Find | None = None
    table: str = ""
    key: str = ""
    lsn: str = ""
    request_id: str = ""
    topic: str = ""
    partition: str = ""
    offset: str = ""

    @classmethod
    def of(cls, params: dict[str, str]) -> "LineageForm":
        """The form of a page's query; `find` is inferred for links that name no form."""
        given = {name: params.get(name, "").strip()[:1024] for name in _FIELDS}
        asked = params.get("find")
        find: Find | None = "row" if asked == "row" else "position" if asked == "position" else None
        if asked not in ("row", "position"):
            if given["table"]:
                find = "row"
            elif given["lsn"] or given["request_id"] or given["topic"]:
                find = "position"
        return cls(find=find, **given)


_FIELDS = ("table", "key", "lsn", "request_id", "topic", "partition", "offset")


@dataclass(frozen=True, slots=True)
class LineageAnswer:
    """A traced row or position as the page shows it."""

    row: RowLineagePublic | None  # the record's own facts, when one record was asked for
    schema_version: int | None
    bronze: list[BronzeCommitPublic] = field(default_factory=list)
    versions: list[TableVersionPublic] = field(default_factory=list)


def trace(
    lineage: LineageService, registry: RegistryService, caller: Principal, form: LineageForm
) -> LineageAnswer | None:
    """The answer to the form the page was asked with; None when none was."""
    if form.find == "row":
        if form.key and not (form.partition or form.offset):
            row = lineage.row_by_key(caller, table=form.table, key=form.key)
        elif form.key:
            raise InvalidLineageQuery(
                "Give a bronze row's partition and offset, or a silver or gold row's key, not both."
            )
        else:
            partition = _number(form.partition, "partition", 2**31 - 1)
            offset = _number(form.offset, "offset", _INT64)
            if partition is None or offset is None:
                raise InvalidLineageQuery(
                    "Give the row's table and either its partition and offset (a bronze row) "
                    "or its key (a silver or gold row, e.g. id=42)."
                )
            row = lineage.row(caller, table=form.table, partition=partition, offset=offset)
        return LineageAnswer(row, _schema_version(registry, row), versions=row.versions)
    if form.find == "position":
        found: PositionsPublic = lineage.positions(
            caller,
            lsn=_number(form.lsn, "LSN", _INT64),
            request_id=form.request_id or None,
            topic=form.topic or None,
            partition=_number(form.partition, "partition", 2**31 - 1),
            offset=_number(form.offset, "offset", _INT64),
        )
        record = None
        if form.topic and len(found.bronze) == 1:  # one record: its facts, as a row shows them
            hit = found.bronze[0]
            record = lineage.row(
                caller, table=hit.table, partition=hit.partition, offset=int(form.offset)
            )
        return LineageAnswer(
            record,
            _schema_version(registry, record),
            bronze=found.bronze,
            versions=found.versions,
        )
    return None


def _number(text: str, what: str, top: int) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) > top:
        raise InvalidLineageQuery(f"The {what} {text[:32]!r} is not a number from 0 to {top}.")
    return int(text)


def _schema_version(registry: RegistryService, row: RowLineagePublic | None) -> int | None:
    """The version of the record's schema under its topic's value subject, when registered."""
    if row is None or row.schema_id is None:
        return None
    try:
        usages = registry.usages(schema_id=SchemaId(row.schema_id))
    except HubError:
        return None
    subject = f"{row.topic}-value"
    return next((int(u.version) for u in usages if u.subject == subject), None)


def when(stamp: datetime | None) -> str:
    """A commit time as the other pages show times."""
    if stamp is None:
        return "—"
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

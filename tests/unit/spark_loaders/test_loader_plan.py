"""What a candidate schema does to a bronze table: Avro -> Spark types, diffs, plans."""

import json
from pathlib import Path
from typing import Any

import pytest

from spark_loaders.bronze.plan import plan, table_columns_from_log
from spark_loaders.tables.evolution import (
    ChangeKind,
    avro_to_sql,
    diff,
    record_columns,
    spark_columns,
    type_name,
)

pytestmark = pytest.mark.unit


def record(*fields: dict[str, Any], doc: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "record", "name": "Order", "fields": list(fields)}
    if doc:
        schema["doc"] = doc
    return schema


V1 = record(
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "price", "type": "float"},
    {"name": "ratio", "type": "int"},
    {"name": "note", "type": ["null", "string"], "default": None},
)


def test_avro_types_map_to_the_spark_types_from_avro_produces() -> None:
    schema = record(
        {"name": "a", "type": "long"},
        {"name": "b", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "c", "type": {"type": "array", "items": "double"}},
        {"name": "d", "type": {"type": "map", "values": ["null", "int"]}},
        {"name": "e", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "f",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "g", "type": ["null", "int", "long"]},
        {"name": "h", "type": ["int", "string"]},
        {"name": "i", "type": {"type": "int", "logicalType": "date"}},
    )
    assert type_name(avro_to_sql(schema)) == (
        "struct<a:bigint,b:string,c:array<double>,d:map<string,int>,e:timestamp,"
        "f:decimal(9,2),g:bigint,h:struct<member0:int,member1:string>,i:date>"
    )
    columns = record_columns(schema)
    assert columns["g"] == ("bigint", True)
    assert columns["a"] == ("bigint", False)


def test_a_recursive_reference_to_a_named_record_resolves() -> None:
    inner = {"type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}]}
    schema = record({"name": "first", "type": inner}, {"name": "second", "type": "Line"})
    assert (
        type_name(avro_to_sql(schema))
        == "struct<first:struct<sku:string>,second:struct<sku:string>>"
    )


def test_added_field_widenings_and_refusals_are_classified_as_delta_4_applies_them() -> None:
    v2 = record(
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "long"},  # int -> long: automatic
        {"name": "price", "type": "double"},  # float -> double: automatic
        {"name": "ratio", "type": "double"},  # int -> double: only by ALTER COLUMN
        {"name": "channel", "type": ["null", "string"], "default": None},
    )
    changes = {c.column: c for c in diff(record_columns(V1), record_columns(v2))}
    assert changes["qty"].kind is ChangeKind.WIDEN_TYPE
    assert changes["price"].kind is ChangeKind.WIDEN_TYPE
    assert changes["ratio"].kind is ChangeKind.WIDEN_TYPE_BY_ALTER
    assert changes["channel"].kind is ChangeKind.ADD_COLUMN
    assert changes["note"].kind is ChangeKind.COLUMN_NOT_WRITTEN
    assert all(c.applicable for c in changes.values())


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("int", "float"),
        ("long", "float"),
        ("long", "double"),
        ("string", "bytes"),
        ("int", "string"),
    ],
)
def test_changes_delta_cannot_apply_are_refused(old: str, new: str) -> None:
    before = record_columns(record({"name": "x", "type": old}))
    after = record_columns(record({"name": "x", "type": new}))
    [change] = diff(before, after)
    assert change.kind is ChangeKind.UNSUPPORTED_TYPE_CHANGE
    assert not change.applicable
    assert "go to quarantine" in change.describe()


def test_nested_struct_fields_are_compared_by_path() -> None:
    def shape(kind: str) -> dict[str, Any]:
        return record(
            {
                "name": "address",
                "type": {"type": "record", "name": "A", "fields": [{"name": "zip", "type": kind}]},
            }
        )

    [change] = diff(record_columns(shape("int")), record_columns(shape("long")))
    assert (change.kind, change.column) == (ChangeKind.WIDEN_TYPE, "address.zip")


def test_spark_schema_json_reads_as_the_same_columns() -> None:
    spark_json = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "string", "nullable": True, "metadata": {}},
            {"name": "qty", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "_hub_offset", "type": "long", "nullable": True, "metadata": {}},
            {
                "name": "tags",
                "type": {"type": "array", "elementType": "string", "containsNull": True},
                "nullable": True,
                "metadata": {},
            },
        ],
    }
    columns = spark_columns(spark_json)
    assert columns["qty"][0] == "int"
    assert columns["_hub_offset"][0] == "bigint"
    assert type_name(columns["tags"][0]) == "array<string>"


def test_plan_against_the_table_lists_changes_and_quarantine() -> None:
    table = {**record_columns(V1), "_hub_offset": ("bigint", True)}
    candidate = record(
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "float"},  # int -> float: Delta cannot widen
        {"name": "price", "type": "float"},
        {"name": "ratio", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "channel", "type": ["null", "string"], "default": None},
    )
    result = plan(candidate, table="bronze.sales_orders", table_columns=table, latest=V1)
    kinds = {c.column: c.kind for c in result.changes}
    assert kinds == {
        "qty": ChangeKind.UNSUPPORTED_TYPE_CHANGE,
        "channel": ChangeKind.ADD_COLUMN,
    }
    assert result.refused
    assert any(q.startswith("TYPE_CHANGE_UNSUPPORTED") for q in result.quarantined)
    text = result.render()
    assert "add column channel string" in text
    assert "cannot change qty int -> float" in text


def test_plan_flags_writers_the_candidate_cannot_resolve() -> None:
    candidate = record(
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "float"},
        {"name": "ratio", "type": "int"},
        {"name": "region", "type": "string"},  # no default: v1 records cannot be read
    )
    result = plan(candidate, table="bronze.t", table_columns=None, latest=V1, latest_version=1)
    assert "registered version 1" in result.baseline
    assert any(q.startswith("SCHEMA_UNRESOLVABLE") and "region" in q for q in result.quarantined)


def test_a_compatible_plan_is_not_refused_and_a_new_subject_adds_every_column() -> None:
    result = plan(V1, table="bronze.t", table_columns=None, latest=None)
    assert not result.refused
    assert {c.kind for c in result.changes} == {ChangeKind.ADD_COLUMN}
    assert len(result.changes) == 5


def test_table_columns_come_from_the_newest_metadata_in_the_delta_log(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()

    def commit(version: int, columns: list[tuple[str, str]]) -> None:
        schema = {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in columns
            ],
        }
        action = {"metaData": {"schemaString": json.dumps(schema)}}
        (log / f"{version:020d}.json").write_text(
            json.dumps({"commitInfo": {}}) + "\n" + json.dumps(action) + "\n"
        )

    commit(0, [("id", "string")])
    commit(1, [("id", "string"), ("qty", "long")])
    (log / f"{2:020d}.json").write_text(json.dumps({"add": {"path": "x.parquet"}}) + "\n")
    columns = table_columns_from_log(tmp_path)
    assert columns is not None and set(columns) == {"id", "qty"}
    assert table_columns_from_log(tmp_path / "missing") is None

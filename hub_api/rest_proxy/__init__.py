"""Confluent REST Proxy compatibility: v2 Avro records and v3 records, streamed."""

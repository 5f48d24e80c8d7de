"""Bronze: every hub topic landed in `bronze.<topic>`, exactly once.

`loader` is the streaming query; `offset_log` plans each batch from its checkpoint,
`kafka_access` checks the loader's login first, `schemas` reads the registry, `decode` turns
framed Avro into columns, `ingestion` stamps the landing time, `quarantine` keeps what cannot
land, `feed_status` records where each topic stands, `replay` and `reprocess` land again what
was set aside, and `plan` tells what a candidate schema would do to a table.
"""

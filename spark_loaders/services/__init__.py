"""The Spark session and the services the `hub` command starts around it: the Hive metastore
(a local Derby server, or a PostgreSQL database), the local Spark standalone cluster and the
analysts' Thrift server."""

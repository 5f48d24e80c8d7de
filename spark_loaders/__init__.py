"""Spark loaders: PySpark Structured Streaming from Kafka topics into Delta tables.

The only hub package that imports PySpark. Nothing is imported here: each name comes from the
module that defines it, so that `spark_loaders.settings` loads without PySpark.

- `runtime/`: what every part runs on (storage locations, pools, stopping, progress, metrics);
- `tables/`: Delta table mechanics (creating and writing tables, comments, column evolution,
  logs, maintenance, and the lineage their commits carry);
- `bronze/`, `silver/`, `warehouse/`: the stages, each landing its layer of tables;
- `runner/`: the stages run together in one Spark application;
- `control/`: the loader's status and control routes on its health port;
- `services/`: the Spark session and the servers around it (metastore, standalone cluster,
  the analysts' Thrift server).
"""

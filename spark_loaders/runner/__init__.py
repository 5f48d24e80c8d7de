"""The stages run together: the bronze query (`streams`) and, next to it in the same Spark
application, the silver streams and warehouse builds (`downstream`)."""

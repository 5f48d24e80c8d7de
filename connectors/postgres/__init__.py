"""PostgreSQL change data capture through logical replication with the built-in `pgoutput`."""

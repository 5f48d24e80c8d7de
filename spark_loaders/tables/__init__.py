"""Delta table mechanics: creating and writing the loader's tables, their comments, column
evolution, MERGE inputs, their logs read in plain Python, maintenance, and the lineage their
commits carry (ledger entries, OpenLineage run events)."""

"""The lineage API: from a table row to its source, and from a source position to every table
version that holds it. The answers come from `hub_api/lineage_service.py`, which the console's
Lineage page asks too."""

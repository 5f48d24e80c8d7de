"""Silver tables of changelog topics, kept next to bronze by the loader.

`changes` puts change events in source order, `keys` finds changelog tables and their keys,
`loader` MERGEs each batch into `<t>_history` and `<t>_current`, and `runner` follows bronze
with those streams (and rebuilds the warehouse model) inside the loader's Spark application.
"""

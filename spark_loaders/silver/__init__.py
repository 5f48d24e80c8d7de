"""Silver tables of changelog topics, kept next to bronze by the loader.

`changes` puts change events in source order, `keys` finds changelog tables and their keys, and
`loader` MERGEs each batch into `<t>_history` and `<t>_current`; `spark_loaders.runner.downstream`
follows bronze with those streams (and rebuilds the warehouse model) inside the loader's Spark
application.
"""

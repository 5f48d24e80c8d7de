"""The hub's base: the error catalogue, retries by failure kind, the database engine, settings
helpers, background processes and the naming contract for topics, subjects and tables.

It imports no other hub package, and `hub_core.errors` and `hub_core.naming` load nothing
beyond the standard library, so every package can stand on it without pulling in another.
"""

"""The hub's base: the error catalogue, the database engine, settings helpers, background
processes, a TTL cache and the naming contract for topics, subjects and tables.

It imports no other hub package, and `hub_core.errors` and `hub_core.naming` load nothing
beyond the standard library, so every package can stand on it without pulling in another.
"""

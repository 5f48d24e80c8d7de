"""The schema registry: Avro schemas by subject and version, their compatibility, and their
storage through SQLAlchemy.

A leaf on top of `hub_core`: it imports no other hub package.
"""

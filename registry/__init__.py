"""The schema registry: Avro schemas by subject and version, stored through SQLAlchemy.

The lowest layer of the hub: it imports no other hub package.
"""

from registry.errors import ErrorCode, HubError, TerminalError, TransientError
from registry.service import RegistryService
from registry.settings import RegistrySettings
from registry.store import SchemaStore
from registry.types import RegisteredSchema, SchemaId, SchemaType, Subject, Version

__all__ = [
    "ErrorCode",
    "HubError",
    "RegisteredSchema",
    "RegistryService",
    "RegistrySettings",
    "SchemaId",
    "SchemaStore",
    "SchemaType",
    "Subject",
    "TerminalError",
    "TransientError",
    "Version",
]

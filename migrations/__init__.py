"""Alembic migrations of the registry database: the only way its tables change."""

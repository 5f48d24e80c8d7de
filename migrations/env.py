"""Alembic environment: migrates the caller's database, else HUB_REGISTRY_DATABASE_URL."""

from alembic import context

from catalog.tables import Base as CatalogBase
from hub_core.database import create_database_engine
from registry.settings import RegistrySettings
from registry.tables import Base as RegistryBase

config = context.config
url = config.get_main_option("sqlalchemy.url") or RegistrySettings().database_url
# Every table of the hub's metadata database: the registry's and the catalog's.
TARGET_METADATA = [RegistryBase.metadata, CatalogBase.metadata]


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=TARGET_METADATA, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_database_engine(url)
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # SQLite changes a table by copying it and dropping the old one, which enforced
            # foreign keys forbid while other tables point at it. Off for the migration only
            # (a PRAGMA that must run outside a transaction); new connections have them on.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()  # end the transaction SQLAlchemy began for the PRAGMA
        context.configure(
            connection=connection,
            target_metadata=TARGET_METADATA,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Running the Alembic migrations in `migrations/` against a registry database."""

from importlib import resources

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect

from hub_core.database import create_database_engine


def alembic_config(database_url: str) -> Config:
    """An Alembic configuration for `database_url`, with no alembic.ini needed."""
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    # ConfigParser interpolation would eat a '%' in a password.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, *, revision: str = "head") -> None:
    """Bring the database up to `revision` (the newest by default)."""
    command.upgrade(alembic_config(database_url), revision)


def current_tables(database_url: str) -> set[str]:
    """The names of the tables in the database (for checks and tests)."""
    engine = create_database_engine(database_url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()

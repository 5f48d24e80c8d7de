"""JDBC-style polling of any SQLAlchemy database: new and changed rows by column values."""

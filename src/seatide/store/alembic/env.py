"""Alembic's entry point, run by ``seatide.store.migrations`` on a connection it already holds.

There is no alembic.ini at run time: the caller passes the connection (inside its own
transaction, under the migration lock) in ``config.attributes["connection"]``, so every
revision runs in that one transaction and concurrent openers stay serialized.
"""

from alembic import context

from seatide.store import schema

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=schema.metadata,
                  # SQLite cannot ALTER most things in place: batch mode copies the table.
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():     # joins the caller's open transaction
    context.run_migrations()

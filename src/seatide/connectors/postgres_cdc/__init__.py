"""Postgres-CDC: a consistent snapshot of PostgreSQL tables, then their changes, by logical decoding."""

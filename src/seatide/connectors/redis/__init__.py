"""Redis sink and source (redis-py), SeaTunnel's ``Redis`` options."""

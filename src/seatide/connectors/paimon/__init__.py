"""Paimon sink and source over a filesystem warehouse, with pypaimon (no JVM)."""

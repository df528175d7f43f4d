"""Sinks that write *different* targets whose options merely spell some naming keys alike must not
be refused by plan/shared_targets.py (review 6): the refusal is for one target with two save modes."""

from __future__ import annotations

from seatide.config.loader import load_job_text

SOURCE = """
env { job.mode = "BATCH" }
source { FakeSource { plugin_output = "fake", row.num = 3,
                      schema = { fields { id = "bigint", name = "string" } } } }
"""


def _job(sinks: str):
    return load_job_text(SOURCE + "sink {\n" + sinks + "\n}\n")


def test_jdbc_sinks_into_two_postgres_schemas_with_one_table_name_are_planned():
    # PostgreSQL: `schema` picks the table's schema; staging.orders and public.orders are two tables.
    _job("""
    Jdbc { plugin_input = "fake", url = "jdbc:postgresql://127.0.0.1:5432/test", user = "u", password = "p",
           table = "orders", schema = "staging", data_save_mode = "DROP_DATA" }
    Jdbc { plugin_input = "fake", url = "jdbc:postgresql://127.0.0.1:5432/test", user = "u", password = "p",
           table = "orders", schema = "public", data_save_mode = "APPEND_DATA" }
    """)


def test_jdbc_sinks_with_a_table_suffix_write_two_tables_and_are_planned():
    # tableSuffix: orders_snapshot (emptied each run) next to orders (appended)
    _job("""
    Jdbc { plugin_input = "fake", url = "jdbc:mysql://127.0.0.1:3306/test", user = "root", password = "p",
           table = "orders", tableSuffix = "_snapshot", data_save_mode = "DROP_DATA" }
    Jdbc { plugin_input = "fake", url = "jdbc:mysql://127.0.0.1:3306/test", user = "root", password = "p",
           table = "orders", data_save_mode = "APPEND_DATA" }
    """)


def test_iceberg_sinks_into_two_warehouses_with_one_catalog_name_are_planned(tmp_path):
    # catalog_name is a local label (SeaTunnel's examples all say "seatunnel"); the catalog is its config
    _job(f"""
    Iceberg {{ plugin_input = "fake", catalog_name = "seatunnel", namespace = "ns", table = "orders",
              iceberg.catalog.config = {{ type = "hadoop", warehouse = "file://{tmp_path}/a" }},
              data_save_mode = "DROP_DATA" }}
    Iceberg {{ plugin_input = "fake", catalog_name = "seatunnel", namespace = "ns", table = "orders",
              iceberg.catalog.config = {{ type = "hadoop", warehouse = "file://{tmp_path}/b" }},
              data_save_mode = "APPEND_DATA" }}
    """)


def test_the_same_table_really_shared_is_still_refused():
    import pytest
    from seatide.config.job import ConfigError
    with pytest.raises(ConfigError, match="same target"):
        _job("""
        Jdbc { plugin_input = "fake", url = "jdbc:mysql://127.0.0.1:3306/test", user = "root", password = "p",
               table = "orders", data_save_mode = "DROP_DATA" }
        Jdbc { plugin_input = "fake", url = "jdbc:mysql://127.0.0.1:3306/test", user = "root", password = "p",
               table = "orders", data_save_mode = "APPEND_DATA" }
        """)

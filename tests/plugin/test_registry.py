"""A job imports the plugins it names, found through ``registry.BUILTIN``; that table names
every plugin SeaTide's modules define, where they define it."""

from __future__ import annotations

import subprocess
import sys

from seatide.plugin import registry


def test_the_builtin_table_is_every_plugin_the_packages_define_and_where():
    registry.load_builtin_plugins()
    # (tests register plugins of their own in the same process: those are not SeaTide's)
    defined = {kind: {cls.plugin_name: cls.__module__ for cls in table.values() if cls.__module__.startswith("seatide.")}
               for kind, table in registry._PLUGINS.items()}
    assert defined == registry.BUILTIN


CHECK = """
import sys
from seatide import intents
intents.check('''
env {{ job.mode = BATCH }}
source {{ FakeSource {{ plugin_output = "f", row.num = 3, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ {sink} {{ plugin_input = "f" }} }}
''', source="test")
print(sorted(m for m in sys.modules if m.startswith("seatide.connectors.") or m.split(".")[0] in ("psycopg", "pymysql")))
"""


def test_checking_a_job_imports_only_the_plugins_it_names():
    done = subprocess.run([sys.executable, "-c", CHECK.format(sink="Console")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = eval(done.stdout.strip().splitlines()[-1])
    assert "seatide.connectors.console" in imported and "seatide.connectors.fake.source" in imported
    assert not [m for m in imported if "cdc" in m or m.startswith(("psycopg", "pymysql", "seatide.connectors.jdbc"))]


def test_a_plugin_name_is_found_in_any_case_and_an_unknown_one_is_not():
    assert registry.lookup("sink", "localfile").plugin_name == "LocalFile"
    assert registry.lookup("source", "POSTGRES-CDC").plugin_name == "Postgres-CDC"
    assert registry.lookup("sink", "NoSuchSink") is None
    assert "Postgres-CDC" in registry.names("source") and "Sql" in registry.names("transform")

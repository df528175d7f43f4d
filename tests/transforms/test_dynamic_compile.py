"""DynamicCompile: the job's Python function over pandas or Arrow batches, row kinds carried."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, D, UA = RowKind.INSERT, RowKind.DELETE, RowKind.UPDATE_AFTER

# The SeaTunnel page's example, in Python: add compile_language, and age 20 becomes 40.
PANDAS_CODE = '''
def transform(batch):
    batch["age"] = batch["age"].where(batch["age"] != 20, 40)
    batch["compile_language"] = "PYTHON"
    return batch
'''


@pytest.fixture
def people(spark):
    return frame(spark, [("Joy Ding", 20, I), ("May Ding", 20, D), ("Kin Dom", 30, UA)],
                 "name string, age int")


def block(code: str, extra: str = "") -> str:
    quoted = '"""' + code + '"""'
    return f'DynamicCompile {{ compile_language = "PYTHON"\n source_code = {quoted}\n {extra} }}'


def test_pandas_function_adds_and_updates_fields_and_keeps_row_kinds(people, ctx):
    transform = transform_from(block(PANDAS_CODE, "output_schema = { fields { name = string, age = int, "
                                                  "compile_language = string } }"))
    out = transform.apply(people, ctx)
    assert out.columns == ["name", "age", "compile_language", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Joy Ding", 40, "PYTHON", I), ("Kin Dom", 30, "PYTHON", UA),
                            ("May Ding", 40, "PYTHON", D)]


def test_arrow_function_from_a_file_may_drop_rows_when_it_keeps_the_row_kind(people, ctx, tmp_path):
    path = tmp_path / "older.py"
    path.write_text("import pyarrow.compute as pc\n\n"
                    "def older(batch):\n"
                    "    kept = batch.filter(pc.greater(batch.column('age'), 25))\n"
                    "    return kept.set_column(1, 'age', pc.multiply(kept.column('age'), 2))\n")
    transform = transform_from(f'DynamicCompile {{ compile_language = PYTHON, compile_pattern = ABSOLUTE_PATH\n'
                               f'absolute_path = "{path}", function = older, batch_format = arrow }}')
    out = transform.apply(people, ctx)
    assert out.columns == ["name", "age", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Kin Dom", 60, UA)]


def test_output_without_row_kind_must_keep_the_row_count(people, ctx, spark):
    code = "def transform(batch):\n    return batch[batch['age'] > 25][['name', 'age']]\n"
    out = transform_from(block(code)).apply(people.coalesce(1), ctx)
    with pytest.raises(Exception, match="keep that column when you drop or add rows"):
        out.collect()


def test_an_exception_in_the_function_names_it(people, ctx):
    code = "def transform(batch):\n    raise KeyError('no such thing')\n"
    with pytest.raises(Exception, match=r"DynamicCompile: transform\(\) raised KeyError"):
        transform_from(block(code)).apply(people, ctx).collect()


def test_runs_on_a_stream(stream):
    code = "def transform(batch):\n    batch['a'] = batch['a'] + 1\n    return batch\n"
    rows = stream.run([{"a": 1, "kind": 3}, {"a": 5, "kind": 0}], "a int", transform_from(block(code)))
    assert rows == [(2, D), (6, I)]


@pytest.mark.parametrize("transform, option, message", [
    ('DynamicCompile { compile_language = JAVA, source_code = "class X {}" }', "compile_language",
     "SeaTide runs Python, not Java or Groovy"),
    ('DynamicCompile { compile_language = GROOVY, source_code = "x" }', "compile_language",
     "not supported"),
    ('DynamicCompile { source_code = "def transform(b): return b" }', "compile_language",
     'set compile_language = "PYTHON"'),
    ('DynamicCompile { compile_language = PYTHON }', "source_code", "source_code is missing"),
    ('DynamicCompile { compile_language = PYTHON, source_code = "def transform(b) return b" }',
     "source_code", "does not compile: expected ':' at <source_code> line 1"),
    ('DynamicCompile { compile_language = PYTHON, source_code = "def other(b): return b" }',
     "function", "defines no function 'transform' (functions it defines: other)"),
    ('DynamicCompile { compile_language = PYTHON, compile_pattern = ABSOLUTE_PATH, absolute_path = "x.py" }',
     "absolute_path", "is relative"),
    ('DynamicCompile { compile_language = PYTHON, compile_pattern = ABSOLUTE_PATH, '
     'absolute_path = "/nonexistent/x.py" }', "absolute_path", "cannot read"),
    ('DynamicCompile { compile_language = PYTHON, source_code = "def transform(b): return b", '
     'output_schema = { fields { a = "nope" } } }', "output_schema", "unknown type 'nope'"),
])
def test_bad_options_are_refused_with_a_clear_message(transform, option, message):
    with pytest.raises(ConfigError) as info:
        load_job_text(job_text(transform))
    assert message in str(info.value) and option in str(info.value)

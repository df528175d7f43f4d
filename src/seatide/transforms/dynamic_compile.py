"""DynamicCompile: rows processed by the job's own code — Python in SeaTide.

SeaTunnel compiles Java or Groovy classes; SeaTide runs a Python function, vectorised on
Spark's executors (``mapInPandas`` or ``mapInArrow``), so no row crosses into Python one at
a time. The contract, written once here and in ``docs/dynamic-compile.md``:

* The code (``source_code``, or the file at ``absolute_path``) defines a function, by
  default ``transform``. It is called once per batch of rows with a ``pandas.DataFrame``
  (``batch_format = pandas``, the default) or a ``pyarrow.RecordBatch``
  (``batch_format = arrow``) and returns one of the same kind.
* The batch holds the input's fields and the hidden ``__row_kind`` column (tinyint:
  0 +I, 1 -U, 2 +U, 3 -D). An output that keeps ``__row_kind`` carries each row's kind; an
  output without it must have exactly the input batch's rows, which keep their kinds.
  A change stream's batch also holds ``__row_seq`` (each row's place in the source's
  order), kept the same way.
* The output holds the fields of ``output_schema`` (SeaTunnel's schema syntax), or the
  input's fields when it is not set, by name; extra columns are dropped.

The code runs with the rights of the Spark workers: a job file that holds code is code.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterator

from seatide.plugin.base import PermanentError, Transform, TransformContext, permanent_in_worker
from seatide.plugin.options import OBJECT, STRING, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.rowkind import HIDDEN_COLUMNS, ROW_KIND_COLUMN, ROW_SEQ_COLUMN
from seatide.plugin.types import SchemaError, parse_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql import types as T

LANGUAGES = ("PYTHON", "JAVA", "GROOVY")
_LOADED: dict[str, Callable] = {}     # per worker process: code text -> its function


class UserCodeError(PermanentError):
    """The job's code failed or returned something outside the contract; retrying won't help."""


def load_function(code: str, name: str, origin: str) -> Callable:
    """Run ``code`` in a fresh module namespace and return its function ``name``.

    Raises SyntaxError, or the code's own exception, or ValueError when ``name`` is not a
    function of the code.
    """
    namespace: dict[str, Any] = {"__name__": "seatide_dynamic_compile"}
    exec(compile(code, origin, "exec"), namespace)   # the job's code is trusted, as in SeaTunnel
    function = namespace.get(name)
    if not callable(function):
        defined = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise ValueError(f"the code defines no function '{name}' (functions it defines: "
                         f"{', '.join(defined) or 'none'})")
    return function


def _cached(code: str, name: str, origin: str) -> Callable:
    key = f"{origin}\0{name}\0{code}"
    if key not in _LOADED:
        _LOADED[key] = load_function(code, name, origin)
    return _LOADED[key]


@register
class DynamicCompile(Transform):
    """Runs the job's Python function over batches of rows (see the module docstring)."""

    plugin_name = "DynamicCompile"
    options = (
        Option("compile_language", enum(*LANGUAGES), None,
               "PYTHON (SeaTide runs Python; SeaTunnel's JAVA and GROOVY are refused)"),
        Option("compile_pattern", enum("SOURCE_CODE", "ABSOLUTE_PATH"), "SOURCE_CODE",
               "where the code is: source_code (SOURCE_CODE) or the file at absolute_path"),
        Option("source_code", STRING, None, "the Python code, inline"),
        Option("absolute_path", STRING, None, "absolute path of a .py file holding the code"),
        Option("function", STRING, "transform", "SeaTide: the function the code defines and we call"),
        Option("batch_format", enum("pandas", "arrow"), "pandas",
               "SeaTide: what the function receives and returns: a pandas DataFrame (pandas) "
               "or a pyarrow RecordBatch (arrow)"),
        Option("output_schema", OBJECT, None,
               "SeaTide: the output row type, schema = { fields { ... } }; default: the input's"),
    )

    def check(self) -> None:
        language = self.opts["compile_language"]
        if language is None:
            raise self.invalid("compile_language", "DynamicCompile: compile_language is missing; "
                               "set compile_language = \"PYTHON\" (SeaTide runs Python code)")
        if language != "PYTHON":
            raise self.invalid("compile_language", f"DynamicCompile: compile_language = {language} is "
                               "not supported: SeaTide runs Python, not Java or Groovy; rewrite the "
                               "code as a Python function and set compile_language = \"PYTHON\" "
                               "(see docs/dynamic-compile.md)")
        self._code, self._origin = self._read_code()
        try:
            load_function(self._code, self.opts["function"], self._origin)
        except SyntaxError as exc:
            option = "source_code" if self._origin == "<source_code>" else "absolute_path"
            raise self.invalid(option, f"DynamicCompile: the Python code does not compile: "
                               f"{exc.msg} at {self._origin} line {exc.lineno}") from None
        except ValueError as exc:
            raise self.invalid("function", f"DynamicCompile: {exc}; define "
                               f"def {self.opts['function']}(batch): ... or set function") from None
        except Exception as exc:  # the code's own top level failed
            raise self.invalid("source_code", f"DynamicCompile: running the code's top level "
                               f"failed: {type(exc).__name__}: {exc}") from None
        self._output = self._output_schema()

    def _read_code(self) -> tuple[str, str]:
        if self.opts["compile_pattern"] == "SOURCE_CODE":
            code = self.opts["source_code"]
            if not code or not code.strip():
                raise self.invalid("source_code", "DynamicCompile: source_code is missing; give the "
                                   "Python code inline, or set compile_pattern = ABSOLUTE_PATH and "
                                   "absolute_path")
            return code, "<source_code>"
        path = self.opts["absolute_path"]
        if not path:
            raise self.invalid("absolute_path", "DynamicCompile: compile_pattern = ABSOLUTE_PATH needs "
                               "absolute_path = \"/path/to/code.py\"")
        if not os.path.isabs(path):
            raise self.invalid("absolute_path", f"DynamicCompile: absolute_path '{path}' is relative; "
                               "give the full path from /")
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read(), path
        except OSError as exc:
            raise self.invalid("absolute_path", f"DynamicCompile: cannot read absolute_path '{path}': "
                               f"{exc.strerror}") from None

    def _output_schema(self) -> "T.StructType | None":
        block = self.opts["output_schema"]
        if block is None:
            return None
        fields = block.get("fields")
        if not isinstance(fields, dict) or not fields:
            raise self.invalid("output_schema", "DynamicCompile: output_schema needs fields, e.g. "
                               "output_schema = { fields { name = string, age = int } }")
        if ROW_KIND_COLUMN in fields:
            raise self.invalid("output_schema", f"DynamicCompile: '{ROW_KIND_COLUMN}' is the hidden "
                               "row kind; do not declare it in output_schema")
        try:
            return parse_row(fields)
        except SchemaError as exc:
            raise self.invalid("output_schema", f"DynamicCompile: output_schema.fields: {exc}") from None

    def catalog(self, upstream):
        from seatide.plan.catalog import shape_unknown

        # The output fields are known only once Spark analyses the code: keep the table name only.
        return shape_unknown(upstream)

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        from pyspark.sql import types as T

        user = T.StructType([f for f in df.schema.fields if f.name not in HIDDEN_COLUMNS])
        fields = (self._output or user).fields
        carried = [T.StructField(ROW_KIND_COLUMN, T.ByteType(), True)]
        if ROW_SEQ_COLUMN in df.columns:
            carried.append(T.StructField(ROW_SEQ_COLUMN, T.LongType(), True))
        out = T.StructType([*fields, *carried])
        run = BatchRunner(self._code, self.opts["function"], self._origin, out.names)
        if self.opts["batch_format"] == "arrow":
            from pyspark.sql.pandas.types import to_arrow_schema

            # mapInArrow takes the batch as returned: cast it to the declared types first.
            run.arrow_schema = to_arrow_schema(out)
            return df.mapInArrow(run.arrow, out)
        return df.mapInPandas(run.pandas, out)


class BatchRunner:
    """What the executors run: pickled with the code text, the function loaded once per worker."""

    def __init__(self, code: str, function: str, origin: str, names: list[str]):
        self.code, self.function, self.origin, self.names = code, function, origin, names
        self.arrow_schema = None

    def _call(self, batch):
        function = _cached(self.code, self.function, self.origin)
        try:
            return function(batch)
        except Exception as exc:
            raise permanent_in_worker(f"DynamicCompile: {self.function}() raised "
                                      f"{type(exc).__name__}: {exc}") from exc

    def _missing(self, have: list[str], rows_in: int, rows_out: int) -> None:
        wanted = [n for n in self.names if n not in HIDDEN_COLUMNS]
        missing = [n for n in wanted if n not in have]
        if missing:
            raise permanent_in_worker(
                f"DynamicCompile: {self.function}() returned no column '{missing[0]}' (it returned "
                f"{', '.join(have) or 'none'}; the output needs {', '.join(wanted)})")
        dropped = [n for n in self.names if n in HIDDEN_COLUMNS and n not in have]
        if dropped and rows_in != rows_out:
            raise permanent_in_worker(
                f"DynamicCompile: {self.function}() returned {rows_out} rows for {rows_in} without "
                f"'{dropped[0]}': keep that column when you drop or add rows")

    def pandas(self, batches: Iterator) -> Iterator:
        import pandas as pd

        for batch in batches:
            result = self._call(batch)
            if not isinstance(result, pd.DataFrame):
                raise permanent_in_worker(f"DynamicCompile: {self.function}() must return a pandas "
                                          f"DataFrame, got {type(result).__name__}")
            self._missing(list(result.columns), len(batch), len(result))
            kept = {n: batch[n].to_numpy() for n in self.names if n in HIDDEN_COLUMNS and n not in result.columns}
            if kept:
                result = result.assign(**kept)
            yield result[self.names]

    def arrow(self, batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in batches:
            result = self._call(batch)
            if isinstance(result, pa.Table):
                result = result.combine_chunks().to_batches()[0] if result.num_rows else \
                    pa.RecordBatch.from_pylist([], schema=result.schema)
            if not isinstance(result, pa.RecordBatch):
                raise permanent_in_worker(f"DynamicCompile: {self.function}() must return a pyarrow "
                                          f"RecordBatch, got {type(result).__name__}")
            have = result.schema.names
            self._missing(have, batch.num_rows, result.num_rows)
            columns = [result.column(have.index(n)) if n in have else batch.column(
                batch.schema.names.index(n)) for n in self.names]
            try:
                yield pa.RecordBatch.from_arrays(columns, names=self.names).cast(self.arrow_schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise permanent_in_worker(f"DynamicCompile: {self.function}() returned columns "
                                          f"that do not fit the output schema: {exc}") from None


__all__ = ["DynamicCompile", "load_function"]

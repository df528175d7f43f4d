"""Python functions as SQL functions of a Sql transform: SeaTide's answer to SeaTunnel's Java UDFs.

A job names each function by where it lives, in the Sql transform's ``udfs`` option or,
for every Sql transform of the job, in the env's ``sql.udfs`` (same entries):

* ``"package.module:function"`` - an importable module (on PYTHONPATH or installed);
* ``"path/to/file.py:function"`` - a Python file (relative paths from the working directory);
  its functions are shipped to Spark's Python workers by value, so the file need not be
  on the workers' path;
* an object ``{ function = "...", name = "SQL_NAME", returns = "double" }`` to choose the SQL
  name (default: the Python function's name) or declare the result type.

A function whose parameters are all annotated ``pandas.Series`` runs vectorised (a pandas
UDF over Arrow batches); any other function runs once per row (NULL arrives as None). The
result type is ``returns`` when given, else the return annotation (``str``, ``int``,
``float``, ``bool``, ``bytes``, ``datetime.date``, ``datetime.datetime``,
``decimal.Decimal``); a vectorised function must declare ``returns``.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import importlib
import importlib.util
import inspect
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from seatide.plugin.options import KeyCheck

_PY_TYPES = {str: "string", int: "bigint", float: "double", bool: "boolean", bytes: "binary",
             datetime.date: "date", datetime.datetime: "timestamp_ntz",
             decimal.Decimal: "decimal(38, 18)"}
_NAME = re.compile(r"[A-Za-z_]\w*\Z")


class UdfError(ValueError):
    """A UDF declaration that cannot be loaded; the message says which and how to fix it."""


@dataclass(frozen=True)
class Udf:
    name: str                 # the SQL name, upper case
    where: str                # as the job wrote it
    function: Callable[..., Any]
    returns: str              # a Spark SQL type
    vectorised: bool

    def spark_function(self):
        """The function as Spark registers it (built on the driver, once per pipeline start)."""
        import warnings

        from pyspark.sql.functions import pandas_udf, udf

        if self.vectorised:
            return pandas_udf(self.function, self.returns)
        with warnings.catch_warnings():   # PySpark warns that plain hints name no Arrow eval type
            warnings.simplefilter("ignore", UserWarning)
            return udf(self.function, self.returns)


def load_udfs(entries: list[Any], check_keys: KeyCheck | None = None, where: str = "udfs") -> dict[str, Udf]:
    """The UDFs of ``entries``; an entry's unknown keys go to ``check_keys``
    (``plugin.options.KeyCheck``), by default ignored."""
    keys = check_keys or KeyCheck()
    udfs: dict[str, Udf] = {}
    for i, entry in enumerate(entries):
        udf = _load(entry, keys, f"{where}[{i}]")
        if udf.name in udfs:
            raise UdfError(f"two UDFs are named {udf.name} ({udfs[udf.name].where} and {udf.where}); "
                           "give one another name with { function = ..., name = ... }")
        udfs[udf.name] = udf
    return udfs


def _load(entry: Any, keys: KeyCheck, where: str) -> Udf:
    if isinstance(entry, str):
        entry = {"function": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("function"), str):
        raise UdfError(f"each UDF is \"module:function\" or {{ function = \"module:function\", "
                       f"name = ..., returns = ... }}, not {entry!r}")
    keys(entry, ("function", "name", "returns"), where)
    where = entry["function"]
    function = _import(where)
    name = str(entry.get("name") or function.__name__)
    if not _NAME.match(name):
        raise UdfError(f"UDF name '{name}' is not a SQL name (letters, digits, _)")
    vectorised = _takes_series(function)
    returns = entry.get("returns") or _returns_from_hint(function, where, vectorised)
    return Udf(name.upper(), where, function, str(returns), vectorised)


def _import(where: str) -> Callable[..., Any]:
    module_name, sep, attr = where.rpartition(":")
    if not sep or not module_name or not attr:
        raise UdfError(f"UDF '{where}' must be written module:function or path/file.py:function")
    try:
        if module_name.endswith(".py"):
            path = os.path.abspath(module_name)
            spec = importlib.util.spec_from_file_location(
                "seatide_udf_" + hashlib.sha1(path.encode()).hexdigest()[:12], path)
            if spec is None or not os.path.isfile(path):
                raise UdfError(f"UDF '{where}': no file {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except UdfError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        raise UdfError(f"UDF '{where}': cannot import {module_name} ({type(exc).__name__}: {exc}); "
                       "put the module on PYTHONPATH or name a .py file") from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise UdfError(f"UDF '{where}': {module_name} has no function {attr}")
    return function


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        import typing

        return typing.get_type_hints(function)
    except Exception:  # noqa: BLE001 - unresolvable hints: treat as absent
        return dict(getattr(function, "__annotations__", {}))


def _takes_series(function: Callable[..., Any]) -> bool:
    import pandas as pd

    params = list(inspect.signature(function).parameters.values())
    hints = _hints(function)
    return bool(params) and all(hints.get(p.name) is pd.Series or
                                str(hints.get(p.name)) in ("pd.Series", "pandas.Series")
                                for p in params)


def _returns_from_hint(function: Callable[..., Any], where: str, vectorised: bool) -> str:
    hint = _hints(function).get("return")
    if hint in _PY_TYPES and not vectorised:
        return _PY_TYPES[hint]
    kind = "a vectorised (pandas.Series) function" if vectorised else "its return annotation"
    raise UdfError(f"UDF '{where}': cannot tell its result type from {kind}; declare it: "
                   f"{{ function = \"{where}\", returns = \"double\" }}")


def check_types(udfs: dict[str, Udf]) -> None:
    """Each declared result type must be one Spark SQL can read."""
    from sqlglot import ParseError, exp

    for udf in udfs.values():
        try:
            exp.DataType.build(udf.returns, dialect="spark")
        except (ParseError, ValueError):
            raise UdfError(f"UDF {udf.name} ({udf.where}): '{udf.returns}' is not a Spark SQL "
                           "type (write e.g. string, bigint, double, decimal(10, 2))") from None


__all__ = ["Udf", "UdfError", "check_types", "load_udfs"]

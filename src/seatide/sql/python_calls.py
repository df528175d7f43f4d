"""Functions of SeaTunnel's SQL that run in Python, because Spark has no such function.

DES (``sql.crypto``'s DES_ENC/DES_DEC, ``sql.zeta_udfs``' DES_ENCRYPT/DES_DECRYPT) and
CHINESE_TO_NUM are vectorised pandas UDFs registered under fixed names: the function is the
same for every query, so registering it again is harmless, and it is never dropped (a
concurrent query may be using it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from sqlglot import exp

from seatide.sql.crypto import DES_DEC_UDF, DES_ENC_UDF, des_dec, des_enc
from seatide.sql.zeta_udfs import PYTHON_CALLS as ZETA_CALLS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# name registered in Spark -> (function over pandas Series, Spark return type)
PYTHON_CALLS: dict[str, tuple[Callable, str]] = {
    DES_ENC_UDF: (des_enc, "string"), DES_DEC_UDF: (des_dec, "string"), **ZETA_CALLS}


def register_python_functions(spark: "SparkSession", tree: exp.Expression) -> None:
    """Register the Python-run functions a translated query calls (driver side, per apply)."""
    called = {node.name.lower() for node in tree.find_all(exp.Anonymous)} & set(PYTHON_CALLS)
    for name in sorted(called):
        function, returns = PYTHON_CALLS[name]
        spark.udf.register(name, _vectorised(function, returns))


def _vectorised(function: Callable, returns: str):
    # PySpark reads the Series hints to choose a pandas UDF; they must be real types, and
    # pandas is imported only here so that translating a query does not load it
    import inspect

    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    arity = len(inspect.signature(function).parameters)

    def run(*columns):
        return function(*columns)

    # a signature of ``arity`` Series: pandas_udf reads it (annotations set as objects, since
    # this module's postponed string annotations would not resolve)
    params = [inspect.Parameter(f"c{i}", inspect.Parameter.POSITIONAL_ONLY, annotation=pd.Series)
              for i in range(arity)]
    run.__signature__ = inspect.Signature(params, return_annotation=pd.Series)
    run.__annotations__ = {**{f"c{i}": pd.Series for i in range(arity)}, "return": pd.Series}
    return pandas_udf(run, returns)


__all__ = ["PYTHON_CALLS", "register_python_functions"]

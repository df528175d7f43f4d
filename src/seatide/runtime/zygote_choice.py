"""Whether a driver uses the Python zygote at all (runtime/python_zygote.py), decided once, as its
session is built.

The zygote checks each request (zygote_fit.py), but a job can bring its own Python where no
request shows it: Spark puts the files of ``spark.submit.pyFiles``, ``spark.files`` and
``addPyFile`` on a worker's path after the worker has started (pyspark/worker_util.py,
``setup_spark_files``), so a forked worker would import the zygote's copy of a library the job
ships. And a request the zygote refuses costs more than no zygote (the client's exec, 20-30 ms),
so a driver whose every request would be refused must not pay the zygote's start (0.7 s of CPU).

So a driver whose job can bring its own Python code or its own Python environment runs Spark's
Python processes with the interpreter itself. The request-time checks stay, a second line.
"""

from __future__ import annotations

import os

from seatide.runtime import zygote_fit

# What Python takes from a file Spark ships: a module, a zip or egg of them, a wheel.
PYTHON_FILES = (".py", ".zip", ".egg", ".whl")
# The environment of every Python process Spark starts (the JVM's PythonWorkerFactory and PySpark's
# SparkContext pass them on), and the Python Spark starts at all.
PYTHON_ENV_SETTINGS = ("spark.executorEnv.", "spark.pyspark.")
# Read by pyarrow and numpy as the zygote imports them (the memory pool, huge pages).
LIBRARY_ENV = ("ARROW_", "NUMPY_")


def own_python(settings: dict[str, str], environ=os.environ, cwd: str | None = None) -> str | None:
    """Why a driver whose session has ``settings``, and whose environment is ``environ``, must
    not use a zygote: the first way its job brings its own Python; None when none does.

    >>> own_python({"spark.submit.pyFiles": "deps.zip"}, {})
    'spark.submit.pyFiles ships deps.zip'
    >>> own_python({"spark.master": "local[*]"}, {}) is None
    True
    """
    shipped = _shipped_python(settings)
    if shipped:
        return shipped
    key = next((key for key in settings if key.startswith(PYTHON_ENV_SETTINGS)), None)
    if key:
        return f"{key} sets its Python processes' environment"
    name = next((name for name in environ if name.startswith(LIBRARY_ENV)), None)
    if name:
        return f"{name} is read by a library the zygote imports"
    if "PYTHONHASHSEED" in environ and not zygote_fit.fixed_hash_seed(environ):
        return "PYTHONHASHSEED leaves each process's hash secret random"
    foreign = zygote_fit.foreign_entry(cwd or os.getcwd(), environ)
    if foreign:
        return f"PYTHONPATH holds {foreign}"
    return None


def _shipped_python(settings: dict[str, str]) -> str | None:
    """The first of the job's files Spark would put on its workers' path: any --py-files, Python
    among spark.files, and any of spark.archives (unpacked in the worker's directory, which
    leads its path: an archive is how a job ships a Python environment)."""
    for key in ("spark.submit.pyFiles", "spark.files", "spark.archives"):
        for entry in (e.strip() for e in settings.get(key, "").split(",")):
            file = entry.split("#", 1)[0]      # an archive's "#alias"
            if file and (key != "spark.files" or file.lower().endswith(PYTHON_FILES)):
                return f"{key} ships {entry}"
    return None

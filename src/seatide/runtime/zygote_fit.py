"""Whether the Python zygote's child for a request would be the process a fresh interpreter would be.

A fresh ``python -m <module>`` takes, as it starts, what the request describes: settings read
from the environment once (``START_ENV``: the hash seed, unbuffered streams, ...), the modules'
import-time settings (``zygote_imports.IMPORT_TIME_ENV``), and a path: its directory, the
request's ``PYTHONPATH``, then the interpreter's own entries. A forked child keeps the zygote's
settings and every module the zygote imported, so the zygote serves a request only when

* each setting is the zygote's own (``settings_fit``): the zygote starts with the values PySpark
  gives every Python process it starts (``zygote_env``), so Spark's requests fit;
* no entry the request puts before the interpreter's own would give a fresh process another copy
  of a module the zygote imported (``shadowed``): a job's own ``pymysql`` in a directory on its
  path, a ``--py-files`` zip holding ``pandas``, a ``psycopg.py`` in the directory Spark starts
  Python in. Spark's own zips (its home's ``pyspark.zip`` and py4j's) hold the PySpark and py4j
  the zygote imported, and SeaTide's source directory is where the zygote imported SeaTide from:
  neither refuses a request.

Anything else is refused, and its client starts the interpreter itself. The child's path is then
the fresh one's (``fresh_path``): modules it imports after its fork come from where a fresh
process would take them.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import resource
import subprocess
import sys
import zipfile

from seatide.runtime.zygote_imports import IMPORT_TIME_ENV

# Read by the interpreter as it starts. On when set to anything but the empty string:
START_FLAGS = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONSAFEPATH", "PYTHONNOUSERSITE",
               "PYTHONINSPECT", "PYTHONFAULTHANDLER", "PYTHONDEVMODE", "PYTHONNODEBUGRANGES",
               "PYTHONWARNDEFAULTENCODING")
# ... and read by value (the locale chooses the streams' encoding and error handler):
START_VALUES = ("PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONWARNINGS", "PYTHONOPTIMIZE",
                "PYTHONDEBUG", "PYTHONVERBOSE", "PYTHONTRACEMALLOC", "PYTHONMALLOC", "PYTHONUSERBASE",
                "PYTHONPYCACHEPREFIX", "PYTHONINTMAXSTRDIGITS", "PYTHONPLATLIBDIR", "PYTHONHOME",
                "PYTHONPROFILEIMPORTTIME", "PYTHONCOERCECLOCALE", "LC_ALL", "LC_CTYPE", "LANG",
                # ... and by modules the zygote imports: zoneinfo's search path, py4j's
                "PYTHONTZPATH", "PY4J_SKIP_COLLECTIONS")
# Families read when numpy, its BLAS and pyarrow load (numpy's switches, the BLAS thread pools, Arrow's
# memory pool and thread pools: ARROW_DEFAULT_MEMORY_POOL, NUMPY_MADVISE_HUGEPAGE). OMP_* is not
# among them yet: Spark sets OMP_NUM_THREADS for its workers alone (review F4, left open).
START_PREFIXES = ("NPY_", "NUMPY_", "OPENBLAS_", "GOTO_", "MKL_", "ARROW_")

# Spark's own archives, which hold the packages the zygote imported from the installation: the
# same code when their version files are the same.
_SPARKS_OWN = ("pyspark", "py4j")
# The archives Spark itself puts on a Python process's path, under its home (PythonUtils.sparkPythonPath):
# its pyspark and py4j zips, and the jar of its core. Any other archive there is a job's or a user's.
_SPARKS_ARCHIVES = re.compile(r"python/lib/(pyspark\.zip|py4j-[^/]+-src\.zip)|jars/spark-core_[^/]+\.jar")
_SUFFIXES = tuple(importlib.machinery.all_suffixes())


def zygote_env(environ: dict[str, str]) -> dict[str, str]:
    """The zygote's environment: the driver's, with the start settings PySpark gives each Python
    process it starts (its SparkContext passes the driver's PYTHONHASHSEED, else "0"; the JVM sets
    PYTHONUNBUFFERED), so that Spark's requests fit."""
    return {**environ, "PYTHONHASHSEED": environ.get("PYTHONHASHSEED", "0"),
            "PYTHONUNBUFFERED": environ.get("PYTHONUNBUFFERED") or "YES"}


def settings_fit(env: dict[str, str], own: dict[str, str] = os.environ) -> bool:
    """Whether a process started with ``env`` would start, and import, with the zygote's settings.
    A hash seed that is not a number ("random", empty, unset) gives each fresh process a secret of
    its own, which children sharing the zygote's could not have."""
    return (fixed_hash_seed(env)
            and all(bool(env.get(name)) == bool(own.get(name)) for name in START_FLAGS)
            and all(env.get(name) == own.get(name) for name in (*START_VALUES, *IMPORT_TIME_ENV))
            and _family(env) == _family(own))


def fixed_hash_seed(env: dict[str, str]) -> bool:
    """Whether ``env`` fixes the interpreter's hash secret (PYTHONHASHSEED, a number up to 2**32-1)."""
    seed = env.get("PYTHONHASHSEED", "")
    return seed.isdecimal() and seed.isascii() and int(seed) <= 4294967295


def _family(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith(START_PREFIXES)}


def refusal(request, interpreter: list[str], own: dict[str, str] = os.environ) -> str | None:
    """Why the zygote's child could not be the fresh process ``request`` describes, or None.
    Decided from the request and what the zygote has already imported, before any import for it."""
    if not settings_fit(request.env, own):
        return "its start settings"
    if not limits_fit(request.limits):
        return "its resource limits"
    foreign = foreign_entry(request.cwd, request.env)
    if foreign:
        return f"its own Python code on its path: {foreign}"
    return shadowed(request.cwd, request.env, interpreter)


def limits_fit(limits: dict[int, tuple[int, int]]) -> bool:
    """Whether the child can take ``limits``: a process may lower its hard limits, never raise them."""
    return all(_at_most(hard, resource.getrlimit(number)[1]) for number, (_soft, hard) in limits.items())


def _at_most(limit: int, other: int) -> bool:
    return other == resource.RLIM_INFINITY or (limit != resource.RLIM_INFINITY and limit <= other)


def foreign_entry(cwd: str, env: dict[str, str]) -> str | None:
    """An entry of the request's PYTHONPATH that is neither Spark's (an archive in its home: its
    pyspark and py4j zips, its core jar) nor SeaTide's own source, or None. A job that brings its
    own Python code (--py-files, a PYTHONPATH directory, a sitecustomize) may bring what a fresh
    interpreter runs as it starts or what a module imported in the zygote would have picked up
    (an optional dependency): such a request is served by a fresh interpreter."""
    homes = [os.path.normpath(home) + os.sep for home in (env.get("SPARK_HOME"), _pysparks_home()) if home]
    own = _seatide_source()
    for entry in leading_path(cwd, env)[0 if env.get("PYTHONSAFEPATH") else 1:]:
        # Spark names its pyspark and py4j zips whether its home has them or not (SeaTide's has
        # neither); those it has, shadowed() checks are the PySpark the zygote imported.
        sparks = any(entry.startswith(home) and _SPARKS_ARCHIVES.fullmatch(entry[len(home):]) for home in homes)
        if not (sparks or entry == own):
            return entry
    return None


def _pysparks_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _seatide_source() -> str:
    import seatide

    return os.path.dirname(os.path.dirname(os.path.abspath(seatide.__file__)))


def interpreter_path() -> list[str]:
    """The entries a fresh interpreter puts after its directory and PYTHONPATH: the standard library,
    site-packages and what their .pth files add. Asked once of one (20 ms), as computing it again
    would repeat the interpreter's own rules."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-P", "-c", "import sys; print('\\0'.join(sys.path))"], env=env,
                          cwd="/", capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.rstrip("\n").split("\0")


def leading_path(cwd: str, env: dict[str, str]) -> list[str]:
    """What a fresh ``python -m`` started in ``cwd`` puts before the interpreter's own entries: its
    directory (unless PYTHONSAFEPATH), then PYTHONPATH's entries made absolute (an empty one is
    the directory), each once."""
    pythonpath = env.get("PYTHONPATH")
    entries = [os.path.normpath(os.path.join(cwd, p)) for p in pythonpath.split(os.pathsep)] if pythonpath else []
    return ([] if env.get("PYTHONSAFEPATH") else [cwd]) + _unique(entries)


def fresh_path(cwd: str, env: dict[str, str], interpreter: list[str]) -> list[str]:
    """``sys.path`` of a fresh ``python -m`` started in ``cwd`` with ``env``: the site module keeps
    the first of equal entries, before the directory goes first."""
    lead = leading_path(cwd, env)
    first, rest = ([], lead) if env.get("PYTHONSAFEPATH") else (lead[:1], lead[1:])
    return first + _unique(rest + interpreter)


def _unique(entries: list[str]) -> list[str]:
    seen: set[str] = set()
    return [e for e in entries if not (e in seen or seen.add(e))]


def shadowed(cwd: str, env: dict[str, str], interpreter: list[str]) -> str | None:
    """A module the zygote imported that a fresh process started in ``cwd`` with ``env`` would
    import from another place, or None. Only the entries before the interpreter's own are read:
    after them, a fresh process looks where the zygote looked."""
    homes = _preloaded_homes()
    found: set[str] = set()
    for entry in leading_path(cwd, env):
        for name, kind in _provided(entry, homes).items():
            home = homes[name]
            if home == "":                  # a namespace package: a regular one anywhere replaces it
                if kind == _REGULAR:
                    return name
            elif kind == _REGULAR and name not in found:
                found.add(name)
                if entry != home and not _sparks_own(entry, name):
                    return name
    interpreters = set(interpreter)
    # imported from an entry of the zygote's own PYTHONPATH or directory that the request lacks
    return next((name for name, home in homes.items() if home and name not in found and home not in interpreters),
                None)


_REGULAR, _NAMESPACE = "regular", "namespace"
_homes: dict[str, str | None] = {}


def _preloaded_homes() -> dict[str, str]:
    """Each top-level module the zygote imported, with the path entry it came from ("" for a
    namespace package, whose portions any entry may add to); built-in and frozen ones left out,
    as no entry comes before them."""
    for name, module in list(sys.modules.items()):
        if name not in _homes and "." not in name and module is not None and name != "__main__":
            _homes[name] = _home(module)
    return {name: home for name, home in _homes.items() if home is not None}


def _home(module) -> str | None:
    spec = getattr(module, "__spec__", None)
    if spec is None:
        return None
    if spec.has_location and spec.origin:
        folder = os.path.dirname(spec.origin)
        return os.path.dirname(folder) if spec.submodule_search_locations is not None else folder
    return "" if spec.origin is None and spec.submodule_search_locations is not None else None


def _provided(entry: str, wanted) -> dict[str, str]:
    """Which of ``wanted`` a path entry holds as a module or regular package (what the import
    system takes from the first entry that has it), or as a namespace package's portion."""
    if os.path.isdir(entry):
        return _in_directory(entry, wanted)
    archive, prefix = entry, ""
    while not os.path.exists(archive) and os.path.dirname(archive) != archive:   # a folder inside a zip
        archive, prefix = os.path.dirname(archive), os.path.join(os.path.basename(archive), prefix)
    if not os.path.isfile(archive):
        return {}
    kinds = _in_archive(archive, prefix.rstrip("/"))
    return {name: kind for name, kind in kinds.items() if name in wanted}


def _in_directory(entry: str, wanted) -> dict[str, str]:
    kinds: dict[str, str] = {}
    try:
        names = os.listdir(entry)
    except OSError:                     # unreadable: the import system finds nothing there either
        return kinds
    for file_name in names:
        name, dot, rest = file_name.partition(".")
        if name not in wanted or kinds.get(name) == _REGULAR:
            continue
        path = os.path.join(entry, file_name)
        if dot and "." + rest in _SUFFIXES and os.path.isfile(path):
            kinds[name] = _REGULAR
        elif not dot and os.path.isdir(path):
            package = any(os.path.isfile(os.path.join(path, "__init__" + s)) for s in _SUFFIXES)
            kinds[name] = _REGULAR if package else _NAMESPACE
    return kinds


_archives: dict[tuple[str, str], tuple[tuple, dict[str, str]]] = {}


def _stat_key(path: str) -> tuple:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _in_archive(archive: str, prefix: str) -> dict[str, str]:
    """The top-level names a zip (a --py-files zip, a jar Spark puts on the path) holds under
    ``prefix``; read once per version of the file (Spark's core jar: 0.1 s)."""
    key = _stat_key(archive)
    cached = _archives.get((archive, prefix))
    if cached and cached[0] == key:
        return cached[1]
    kinds: dict[str, str] = {}
    try:
        with zipfile.ZipFile(archive) as opened:
            members = opened.namelist()
    except (OSError, zipfile.BadZipFile):
        members = []
    start = prefix + "/" if prefix else ""
    for member in members:
        if not member.startswith(start):
            continue
        top, slash, rest = member[len(start):].partition("/")
        if not slash and top.endswith((".py", ".pyc")):
            kinds[top.rsplit(".", 1)[0]] = _REGULAR
        elif slash and rest in ("__init__.py", "__init__.pyc"):
            kinds[top] = _REGULAR
        elif slash:
            kinds.setdefault(top, _NAMESPACE)
    _archives[(archive, prefix)] = key, kinds
    return kinds


_versions: dict[tuple[str, str], tuple[tuple, bool]] = {}


def _sparks_own(entry: str, name: str) -> bool:
    """Whether ``entry`` is one of Spark's zips holding the version of ``name`` the zygote imported."""
    if name not in _SPARKS_OWN or not os.path.isfile(entry):
        return False
    key = _stat_key(entry)
    cached = _versions.get((entry, name))
    if cached and cached[0] == key:
        return cached[1]
    try:
        with zipfile.ZipFile(entry) as opened:
            theirs = opened.read(f"{name}/version.py")
        with open(os.path.join(os.path.dirname(sys.modules[name].__file__), "version.py"), "rb") as handle:
            same = handle.read() == theirs
    except (OSError, KeyError, zipfile.BadZipFile):
        same = False
    _versions[(entry, name)] = key, same
    return same

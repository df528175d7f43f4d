"""The house's shape, read from the source alone (fast tier: no Spark, no cluster, no import).

docs/architecture.md draws SeaTide's layers; these tests hold the code to that drawing: no import
cycle among SeaTide's modules, no module over 400 lines, and each package importing only the
packages below it. Every import counts, at the top of a module or inside a function: a lazy
import hides a cycle from Python at start-up, not from a reader who has to understand both
modules at once. Imports under ``TYPE_CHECKING`` count too, for the same reason.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "seatide"
MAX_LINES = 400

# docs/architecture.md's drawing, top first. A package imports only packages on rows below its
# own; packages on one row are independent of each other. A top-level module (intents.py,
# clock.py, ...) is a package of one module. A new package must be placed here, and drawn there.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("testing",),
    ("cli",),
    ("api",),
    ("ui",),
    ("intents",),
    ("coordinator", "worker"),
    ("runtime",),
    ("connectors", "transforms"),
    ("sql",),
    ("plan",),
    ("plugin",),
    ("store",),
    ("secrets",),
    ("config",),
    ("clock", "timeouts", "failpoints"),
)

# Imports that run up the drawing today, each one module -> module: any other fails the test, and
# each entry must still exist (a fixed one is taken off). Why each is there, and what removes it:
KNOWN_UPWARD: dict[tuple[str, str], str] = {
    # config validates a job by building its plugins and checking their links: the loader (and
    # the env and job model it reads into) sit above plugin and plan in truth. What removes them:
    # the loader's building step moved above plan (a plan/load.py taking config's parsed text), and
    # env's options declared with config's own Option rather than plugin.options'.
    ("config.env", "plugin.options"): "env's options are declared with plugin's Option",
    ("config.env", "sql.udf"): "env checks sql.udfs at load time, with the SQL layer's UDF loader",
    ("config.job", "plugin.base"): "PluginSpec.plugin is typed as a Plugin (TYPE_CHECKING)",
    ("config.job", "plugin.options"): "ConfigWarning carries plugin.options' UnknownOption/OptionNotice (TYPE_CHECKING)",
    ("config.loader", "plugin.base"): "the loader builds each plugin",
    ("config.loader", "plugin.options"): "the loader reads each block with plugin.options.read_options",
    ("config.loader", "plugin.registry"): "the loader looks each plugin up by name",
    ("config.loader", "plan.catalog"): "a sink is built from the catalog of the tables it receives",
    ("config.loader", "plan.dag"): "a load ends by checking the job's links (check_links)",
    # store/restore.py is being changed by another helper today (issue 31): what removes this is
    # the outline passed in by the caller, as store/jobs.py's submit_job takes it.
    ("store.restore", "plan.outline"): "a resume records the job's outline, computed in the store",
    # A worker registers itself and heartbeats through coordinator/service.py, which another helper
    # is changing today: register_node, node_heartbeat and kill_if_reachable moved to a store
    # module (store/nodes.py) remove these.
    ("worker.agent", "coordinator.service"): "register_node, kill_if_reachable",
    ("worker.presence", "coordinator.service"): "register_node, node_heartbeat",
}


@lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, not ``.__init__``)."""
    found = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its text. ``from a.b import c``
    names ``a.b`` and, when it is a module, ``a.b.c``; a name is taken to its nearest module."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:      # relative: from the module's package (a package's own, for __init__)
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if path.name == "__init__.py" else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module and name.startswith(f"{PACKAGE}."):
            found.add(name)
    return found


@lru_cache(maxsize=1)
def _imports() -> dict[str, frozenset[str]]:
    modules = _modules()
    return {module: frozenset(_imported(module, path, modules)) for module, path in modules.items()}


def _cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def _short(module: str) -> str:
    return module.removeprefix(f"{PACKAGE}.")


def _package(module: str) -> str:
    return _short(module).split(".")[0]


def _row() -> dict[str, int]:
    """Package -> its row, counted from the bottom (a higher number is higher up)."""
    return {package: len(LAYERS) - i for i, row in enumerate(LAYERS) for package in row}


def _upward() -> set[tuple[str, str]]:
    """Every (module, module) import whose target's package is not on a row below the importer's."""
    row = _row()
    found = set()
    for module, targets in _imports().items():
        if module == PACKAGE:
            continue
        for target in targets:
            mine, theirs = _package(module), _package(target)
            if mine != theirs and row[theirs] >= row[mine]:
                found.add((_short(module), _short(target)))
    return found


def test_no_import_cycle_among_seatides_modules():
    cycles = _cycles(dict(_imports()))
    assert not cycles, ("import cycles (each line one; move the shared piece to the lower module or "
                        "a small module of its own):\n" + "\n".join(
                            "  " + " <-> ".join(_short(m) for m in cycle) for cycle in cycles))


def test_no_module_is_over_400_lines():
    long = sorted((sum(1 for _ in path.open(encoding="utf-8")), _short(module))
                  for module, path in _modules().items())
    over = [f"  {module}: {lines} lines" for lines, module in reversed(long) if lines > MAX_LINES]
    assert not over, f"modules over {MAX_LINES} lines (split each along a seam of its domain):\n" + "\n".join(over)


def test_every_package_is_on_the_drawing():
    placed = set(_row())
    packages = {_package(module) for module in _modules() if module != PACKAGE}
    assert packages - placed == set(), (f"packages not on the layer drawing: {sorted(packages - placed)}; place "
                                        "each in LAYERS here and in docs/architecture.md")
    assert placed - packages == set(), f"LAYERS names packages that do not exist: {sorted(placed - packages)}"


def test_each_package_imports_only_the_packages_below_it():
    row = _row()
    new = sorted(_upward() - set(KNOWN_UPWARD))
    assert not new, ("imports that run up or across the layers of docs/architecture.md:\n" + "\n".join(
        f"  {importer} -> {target} ({_package(importer)}, row {row[_package(importer)]}, imports "
        f"{_package(target)}, row {row[_package(target)]})" for importer, target in new)
        + "\nmove what is shared down, or have the caller pass it in")


def test_every_known_upward_import_still_exists():
    """The list of known exceptions only shrinks: an import fixed is taken off it."""
    gone = sorted(set(KNOWN_UPWARD) - _upward())
    assert not gone, f"no longer imported (remove from KNOWN_UPWARD in tests/test_layers.py): {gone}"


def test_the_reader_sees_cycles_and_imports_inside_functions_and_type_checking_blocks():
    """The reader itself: an import inside a function or under TYPE_CHECKING is an import."""
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert _cycles(edges) == [["a", "b", "c"]]
    imports = _imports()
    assert "seatide.config.job" in imports["seatide.plan.dag"]                # at the top
    assert "seatide.plan.warm_up" in imports["seatide.runtime.warm_driver"]   # inside a function
    assert "seatide.config.job" in imports["seatide.plan.catalog"]            # under TYPE_CHECKING

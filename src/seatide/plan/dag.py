"""The job DAG and its pipelines.

Plugins are linked by name (``plugin_output`` / ``plugin_input``) or, with neither,
each transform or sink reads the output of the plugin written before it. The DAG's
connected components are its pipelines: each runs as one Spark query with its own
checkpoint directory, and finishes, fails and restores on its own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from seatide.config.job import ConfigError, JobConfig, PluginSpec
from seatide.plan.shared_targets import refuse_mixed_save_modes
from seatide.plan.source_identity import IDENTITY_VERSION, base64_forms, source_identity, table_lists
from seatide.plugin.rowkind import RowKind


@dataclass
class Pipeline:
    pipeline_id: int                       # 1-based, in order of the first source
    sources: list[PluginSpec]
    transforms: list[PluginSpec]           # topological order
    sinks: list[PluginSpec]
    inputs: dict[str, list[str]] = field(default_factory=dict)  # plugin_id -> input plugin_ids

    @property
    def plugins(self) -> list[PluginSpec]:
        return [*self.sources, *self.transforms, *self.sinks]

    @property
    def multi_table(self) -> bool:
        """Its source reads several tables: the pipeline routes each table's rows to its own
        targets, one micro-batch at a time (docs/design/multi-table.md)."""
        return any(s.plugin is not None and s.plugin.multi_table() for s in self.sources)

    def routed(self, micro_batch: bool) -> bool:
        """Whether the pipeline runs table by table at batch time (runtime.table_routing): a
        multi-table source, or one whose checkpointed stream carries split descriptors that each
        batch expands (the Jdbc source: Spark's JDBC reader per split), when every transform can
        run one micro-batch at a time."""
        if self.multi_table:
            return True
        return micro_batch and len(self.sources) == 1 and self.sources[0].plugin.expands_batches() and \
            all(len(ins) == 1 for ins in self.inputs.values()) and \
            not any(t.plugin.per_table_refusal() for t in self.transforms)

    def chain(self, sink_id: str) -> list[PluginSpec]:
        """The transforms between the source and ``sink_id``, in the order rows pass them."""
        by_id = {s.plugin_id: s for s in self.plugins}
        chain, current = [], self.inputs[sink_id][0]
        while by_id[current].kind == "transform":
            chain.append(by_id[current])
            current = self.inputs[current][0]
        return chain[::-1]

    def fingerprint(self) -> str:
        """What a checkpoint of this pipeline depends on: its sources, in order, and their options
        as read, however the job file spells them (``plan.source_identity``), but for a source's table
        list where its offsets name their tables (``Source.table_list_options``) and its credentials.
        Prefixed by the rule that made it (``IDENTITY_VERSION``), which ``fits`` reads.

        A checkpoint taken under one fingerprint cannot restore a pipeline with another
        (Spark would read offsets of the wrong source).
        """
        return f"{IDENTITY_VERSION}:{self._identity()}"

    def _identity(self) -> str:
        return _digest([list(source_identity(s)) for s in self.sources])

    def fits(self, fingerprint) -> bool:
        """Whether a checkpoint written under ``fingerprint`` restores this pipeline: by the rule its
        prefix names, or, unprefixed, by this rule before it was named or one an earlier version wrote
        for these very options (``_written_fingerprints``). Anything but a string fits nothing (a
        hand-edited seatide.json: store/checkpoint_metadata.py names it)."""
        if not isinstance(fingerprint, str):
            return False
        version, named, digest = fingerprint.rpartition(":")
        if named:       # a rule of a later release than this one is not known here
            return version == IDENTITY_VERSION and digest == self._identity()
        return digest == self._identity() or digest in self._written_fingerprints()

    def _written_fingerprints(self) -> set[str]:
        """Earlier versions' fingerprints: over each source's block as written but for its links, with
        its table lists (the first) or without; a job in JSON form wrote its ``plugin_name`` in them.
        The file form of the job then may not be the one now: both are tried; so are the blocks with
        their base64-shaded options in clear or shaded (``source_identity.base64_forms``: the job was
        encrypted or decrypted since)."""
        forms = (lambda b, s: {k: v for k, v in b.items() if k != "plugin_name"},
                 lambda b, s: {**b, "plugin_name": b.get("plugin_name", s.name)})
        return {_digest([[s.name, _canonical(form(b, s), lists(s))] for b, s in zip(blocks, self.sources)])
                for blocks in base64_forms(self.sources) for form in forms for lists in (table_lists, lambda s: ())}


@dataclass
class Plan:
    job: JobConfig
    pipelines: list[Pipeline]

    def pipeline(self, pipeline_id: int) -> Pipeline:
        return next(p for p in self.pipelines if p.pipeline_id == pipeline_id)


def _canonical(block: dict, also_ignored: tuple[str, ...] = ()) -> dict:
    # The fingerprinted form of earlier versions (Pipeline._written_fingerprints): kept as it was.
    ignored = {"plugin_output", "result_table_name", "plugin_input", "source_table_name", "parallelism",
               *also_ignored}
    return {k: v for k, v in sorted(block.items()) if k not in ignored}


def _digest(shape: list) -> str:
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def resolve_inputs(job: JobConfig) -> dict[str, list[PluginSpec]]:
    """plugin_id -> the plugins it reads, or ConfigError for a link that names nothing."""
    return _link(job.plugins, lambda spec, message, option: _error(job, spec, message, option))


def outline_pipelines(plugins: list[PluginSpec]) -> list[Pipeline]:
    """The pipelines of a validated job's plugins (``load_job_outline``), in file order;
    nothing is checked again and no plugin needs to be instantiated."""

    def refused(spec: PluginSpec, message: str, option: str) -> ConfigError:
        return ConfigError("job", message, plugin=spec.label, option=option)

    return _pipelines(plugins, _link(plugins, refused), plugins)


def _link(plugins: list[PluginSpec], error) -> dict[str, list[PluginSpec]]:
    """plugin_id -> the plugins it reads: by plugin_input, or else the plugin before it."""
    by_output: dict[str, PluginSpec] = {}
    for spec in plugins:
        if spec.output is None:
            continue
        if spec.kind == "sink":
            raise error(spec, "a sink has no output; remove plugin_output", "plugin_output")
        if spec.output in by_output:
            other = by_output[spec.output]
            raise error(spec, f"plugin_output '{spec.output}' is already used by {other.label}; "
                        "output names must be unique", "plugin_output")
        by_output[spec.output] = spec
    inputs: dict[str, list[PluginSpec]] = {}
    previous: PluginSpec | None = None
    for spec in plugins:
        if spec.kind != "source":
            if spec.inputs:
                resolved = []
                for name in spec.inputs:
                    if name not in by_output:
                        known = ", ".join(sorted(by_output)) or "none"
                        raise error(spec, f"plugin_input '{name}' names nothing "
                                    f"(outputs defined: {known})", "plugin_input")
                    resolved.append(by_output[name])
                inputs[spec.plugin_id] = resolved
            elif previous is None:
                raise error(spec, "nothing to read: no plugin before it has an output", "plugin_input")
            else:
                inputs[spec.plugin_id] = [previous]
            if spec.kind == "transform" and len(inputs[spec.plugin_id]) != 1:
                raise error(spec, "a transform reads exactly one input", "plugin_input")
        if spec.kind != "sink":
            previous = spec
    return inputs


def check_links(job: JobConfig) -> Plan:
    """Validate the DAG: links, cycles, unread outputs, row kinds each sink can apply."""
    inputs = resolve_inputs(job)
    order = _topological(job, inputs)
    read = {i.plugin_id for ins in inputs.values() for i in ins}
    for spec in job.plugins:
        if spec.kind != "sink" and spec.plugin_id not in read:
            raise _error(job, spec, "its output is read by nothing: link a transform or sink to it "
                         "with plugin_input, or remove it", "plugin_output")
    kinds = _row_kinds(order, inputs)
    for sink in job.sinks:
        for route in sink.plugin.routes or [None]:
            plugin = route.sink if route is not None else sink.plugin
            extra = kinds[sink.plugin_id] - plugin.accepted_row_kinds
            if extra:
                names = ", ".join(k.name for k in sorted(extra))
                table = f" (writing table {route.name})" if route is not None else ""
                raise _error(job, sink, f"{sink.name} cannot apply {names} rows, which its input may "
                             f"carry{table}; {plugin.row_kind_hint}", "plugin_input")
    refuse_mixed_save_modes(job)     # one target, one save mode: applied once, whoever comes first
    plan = Plan(job, _pipelines(job.plugins, inputs, order))
    for pipeline in plan.pipelines:
        if pipeline.multi_table:
            _check_multi_table(job, pipeline)
    return plan


def _check_multi_table(job: JobConfig, pipeline: Pipeline) -> None:
    """What a pipeline routing several tables cannot do, refused before anything runs."""
    source = next(s for s in pipeline.sources if s.plugin.multi_table())
    if len(pipeline.sources) > 1:
        other = next(s for s in pipeline.sources if s is not source)
        raise _error(job, other, f"{source.label} reads several tables, and a pipeline with a multi-table "
                     f"source has no other source; give {other.label} a sink of its own "
                     "(plugin_output / plugin_input), so that it runs as a pipeline of its own", "plugin_input")
    for spec in pipeline.transforms:
        why = spec.plugin.per_table_refusal()
        if why:
            raise _error(job, spec, f"{spec.name} cannot run on the rows of {source.label}, which reads several "
                         f"tables: SeaTide applies a transform to each table's rows one micro-batch at a time, "
                         f"and {why}", "plugin_input")
    for spec in [*pipeline.transforms, *pipeline.sinks]:
        if len(pipeline.inputs[spec.plugin_id]) > 1:
            raise _error(job, spec, f"{spec.label} reads several inputs, one of them the tables of {source.label}; "
                         "a sink of a multi-table source reads that source alone (through transforms)",
                         "plugin_input")


def build_plan(job: JobConfig) -> Plan:
    return check_links(job)


def _topological(job: JobConfig, inputs: dict[str, list[PluginSpec]]) -> list[PluginSpec]:
    state: dict[str, int] = {}    # 1 visiting, 2 done
    order: list[PluginSpec] = []
    by_id = {s.plugin_id: s for s in job.plugins}

    def visit(spec: PluginSpec, path: list[str]) -> None:
        mark = state.get(spec.plugin_id)
        if mark == 2:
            return
        if mark == 1:
            cycle = path[path.index(spec.plugin_id):] + [spec.plugin_id]
            labels = " -> ".join(by_id[p].label for p in cycle)
            raise _error(job, spec, f"plugins form a cycle: {labels}", "plugin_input")
        state[spec.plugin_id] = 1
        for upstream in inputs.get(spec.plugin_id, []):
            visit(upstream, path + [spec.plugin_id])
        state[spec.plugin_id] = 2
        order.append(spec)

    for spec in job.plugins:
        visit(spec, [])
    return order


def _row_kinds(order: list[PluginSpec], inputs: dict[str, list[PluginSpec]]) -> dict[str, frozenset[RowKind]]:
    kinds: dict[str, frozenset[RowKind]] = {}
    for spec in order:
        if spec.kind == "source":
            kinds[spec.plugin_id] = spec.plugin.row_kinds()
            continue
        upstream = frozenset().union(*(kinds[i.plugin_id] for i in inputs[spec.plugin_id]))
        kinds[spec.plugin_id] = (spec.plugin.row_kinds(upstream) if spec.kind == "transform" else upstream)
    return kinds


def _pipelines(plugins: list[PluginSpec], inputs: dict[str, list[PluginSpec]],
               order: list[PluginSpec]) -> list[Pipeline]:
    parent = {s.plugin_id: s.plugin_id for s in plugins}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for pid, ups in inputs.items():
        for up in ups:
            parent[root(pid)] = root(up.plugin_id)
    groups: dict[str, list[PluginSpec]] = {}
    for spec in order:
        groups.setdefault(root(spec.plugin_id), []).append(spec)
    ordered = sorted(groups.values(), key=lambda g: min(s.index for s in g if s.kind == "source"))
    pipelines = []
    for number, group in enumerate(ordered, start=1):
        ids = {s.plugin_id for s in group}
        pipelines.append(Pipeline(
            pipeline_id=number,
            sources=sorted((s for s in group if s.kind == "source"), key=lambda s: s.index),
            transforms=[s for s in group if s.kind == "transform"],
            sinks=sorted((s for s in group if s.kind == "sink"), key=lambda s: s.index),
            inputs={pid: [u.plugin_id for u in ups] for pid, ups in inputs.items() if pid in ids}))
    return pipelines


def _error(job: JobConfig, spec: PluginSpec, message: str, option: str) -> ConfigError:
    return ConfigError(job.source_name, message, plugin=spec.label, option=option, line=spec.line)

"""The plan: pipelines are the DAG's connected components; fingerprints follow the sources."""

from __future__ import annotations

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan


def _file(name: str, fmt: str = "parquet") -> str:
    return f'LocalFile {{ plugin_output = "{name}", path = "/tmp/{name}", file_format_type = "{fmt}" }}'


def test_connected_components_become_pipelines_in_source_order():
    text = f"""
source {{ {_file("a")}
          {_file("b")}
          {_file("c")} }}
transform {{ Sql {{ plugin_input = "c", plugin_output = "c2", query = "select * from c" }} }}
sink {{
  Console {{ plugin_input = ["a", "b"] }}
  Console {{ plugin_input = "c2" }}
  Console {{ plugin_input = "a" }}
}}
"""
    plan = build_plan(load_job_text(text))
    shapes = [([s.plugin_id for s in p.sources], [t.plugin_id for t in p.transforms], [k.plugin_id for k in p.sinks])
              for p in plan.pipelines]
    assert shapes == [(["source[0]", "source[1]"], [], ["sink[0]", "sink[2]"]),
                      (["source[2]"], ["transform[0]"], ["sink[1]"])]
    assert plan.pipelines[0].inputs["sink[0]"] == ["source[0]", "source[1]"]


def test_fingerprint_changes_with_the_sources_only():
    base = f"source {{ {_file('a')} }}\nsink {{ Console {{}} }}"
    same_sources = f"source {{ {_file('a')} }}\ntransform {{ Sql {{ query = \"select * from a\" }} }}\nsink {{ Console {{}} }}"
    other_format = f"source {{ {_file('a', 'orc')} }}\nsink {{ Console {{}} }}"
    fp = [build_plan(load_job_text(t)).pipelines[0].fingerprint() for t in (base, same_sources, other_format)]
    assert fp[0] == fp[1] != fp[2]


def test_a_cdc_sources_table_list_is_left_out_of_the_fingerprint_and_an_older_fingerprint_still_fits():
    """A CDC source's offsets name their tables, so a checkpoint survives tables added to (or removed
    from) table-names; any other option still makes it another pipeline. A checkpoint written when
    the table list was fingerprinted too fits the same options."""
    import hashlib
    import json

    def plan(tables: str, slot: str = "s1"):
        return build_plan(load_job_text(
            'env { job.mode = "STREAMING" }\nsource { Postgres-CDC { base-url = "jdbc:postgresql://127.0.0.1:1/d", '
            f'username = "u", password = "", slot.name = "{slot}", table-names = [{tables}] }} }}\n'
            'sink { Console {} }')).pipelines[0]

    one, two, other_slot = plan('"d.public.a"'), plan('"d.public.a", "d.public.b"'), plan('"d.public.a"', "s2")
    assert one.fingerprint() == two.fingerprint() != other_slot.fingerprint()
    before = [[s.name, {k: v for k, v in sorted(s.block.items())}] for s in one.sources]
    older = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    assert one.fits(older) and not two.fits(older) and not other_slot.fits(one.fingerprint())

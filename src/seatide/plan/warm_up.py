"""Plan a small job once, at start, before anyone asks for a real one.

A process's first job config is slow to read: parsing it builds the HOCON grammar and
imports every built-in plugin and the SQL translator (0.5-2 s on a 2-core host, most of a
submit's time). A coordinator (for its first submit) and a warm driver (for its attempt)
pay that while idle instead.
"""

from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger(__name__)

SAMPLE_JOB = """
env { job.name = "warm-up", job.mode = BATCH, checkpoint.interval = 1000 }
source { FakeSource { plugin_output = "warm", row.num = 1, schema = { fields { id = bigint, name = string } } } }
transform { Sql { plugin_input = "warm", plugin_output = "out", query = "select id, upper(name) as name from warm" } }
sink { LocalFile { plugin_input = "out", path = "/nonexistent/seatide-warm-up", file_format_type = "json" } }
"""


def sample_job():
    """``SAMPLE_JOB`` read and planned as a submit does: (its config, its plan)."""
    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan

    # As intents.check reads a submitted job (nothing decrypted here); through the loader itself,
    # since plan sits below the intents that record jobs.
    config = load_job_text(SAMPLE_JOB, source_name="the warm-up job", runs_here=False)
    return config, build_plan(config)


def plan_sample_job() -> None:
    """Read and plan ``SAMPLE_JOB`` as a submit would; a failure costs only the warm-up."""
    try:
        sample_job()
    except Exception:
        log.warning("warming up the job planner failed; the first job pays for it", exc_info=True)


def plan_sample_job_soon(then: Callable[[], None] | None = None) -> None:
    """``plan_sample_job`` in a background thread, then ``then``: a server answers while it warms up."""
    import threading

    def warm_up() -> None:
        plan_sample_job()
        if then is not None:
            then()

    threading.Thread(target=warm_up, name="warm-up-planner", daemon=True).start()

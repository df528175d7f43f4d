"""Through the real REST app and store: a value the submitter's environment fed into is masked by where it came
from, not by how it looks (outside review H2). ``job.name = "nightly_"${T}`` with ``T=acme`` showed
``nightly_acme`` (an ordinary word inside a name, never searched for) and ``"n-"${T}`` with ``T=x7q`` showed
``n-x7q`` (under four characters, never searched for) in every view of the job.
"""

from __future__ import annotations

import pytest

from seatide.secrets import MASK, mask_message, secret_values
from tests.api.test_seatunnel_v2 import http  # noqa: F401  (a fixture: the real app on a fresh store)

JOB = """env {{ job.mode = BATCH, job.name = "{prefix}"${{T}} }}
source {{ FakeSource {{ row.num = 3, plugin_output = "rows_"${{T}}, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ plugin_input = "rows_"${{T}}, path = "/data/out", file_format_type = json }} }}
"""


@pytest.mark.parametrize("prefix, value", [("nightly_", "acme"), ("n-", "x7q"), ("n-", "ab")])
def test_every_view_masks_a_value_the_environment_fed_into_whole(http, prefix, value):
    answer = http.post("/api/v1/submit-job", json={"config": JOB.format(prefix=prefix), "jobId": "j1",
                                                   "environment": {"T": value}})
    assert answer.status_code == 200, answer.text
    shown = {"submit": answer.text}
    for path in ("/api/v1/jobs", "/api/v1/running-jobs", "/api/v1/job-info/j1", "/running-jobs", "/job-info/j1",
                 "/api/v1/jobs/j1/plan", "/metrics"):
        got = http.get(path)
        assert got.status_code == 200, (path, got.text)
        shown[path] = got.text
    for where, text in shown.items():
        assert prefix + value not in text and "rows_" + value not in text, (where, text[:2000])
        if len(value) >= 3:     # searched for in free text too; a 1-2 character value only where it is the whole
            assert value not in text, (where, text[:2000])


def test_a_value_from_the_environment_is_masked_whole_and_searched_in_messages():
    secrets = secret_values('env { job.name = "n-"${T}, tag = ${S} }', {"$env": "1", "$env.T": "x7q", "$env.S": "z"})
    assert mask_message("n-x7q", secrets) == MASK
    assert mask_message("z", secrets) == MASK
    assert mask_message("failed for tenant x7q and acmex7q", secrets) == f"failed for tenant {MASK} and acme{MASK}"
    assert mask_message("a zebra", secrets) == "a zebra"     # a 1-2 character value is not searched in free text

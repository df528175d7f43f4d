"""The environment a submit or resume sends, and a coordinator that may not record it (outside review M1).

A coordinator from before recorded environments ignores a request's ``environment``: the job would read its
``${NAME}``s from that coordinator's environment (and its workers'), not from the submitting shell's, and nobody
would be told. No request can make such a coordinator submit only if it records the environment (it ignores a
condition as it ignores the field), so the command:

* asks first (``GET /version``, which such a coordinator answers 404) and, when the coordinator is older, sends
  nothing: nothing runs, and the user is told what to do;
* then checks the answer of the submit or resume itself (``environmentRecorded``: how many names were recorded),
  since several coordinators of a cluster in the middle of an upgrade may answer at one address. An answer
  that does not confirm them is an older coordinator's: the job is canceled at once, before its driver can
  usually start, and the command fails saying so.

Only a non-empty environment is checked: with none sent, there is nothing such a coordinator drops.
"""

from __future__ import annotations

from typing import Mapping

from seatide.cli.args import EXIT_FAILED, CommandRefused as Refused
from seatide.cli.http_client import Answered, HttpClient

SHOWN_NAMES = 5
HOW_TO_FIX = ("Upgrade every coordinator of the cluster to this version of SeaTide, or give the values with -i "
              "(plain values only: -i pastes a value into the text before it is parsed, so a quote, #, comma or ${ "
              "in it changes the file)")


def _names(environment: Mapping[str, str]) -> str:
    names = sorted(environment)
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    return ", ".join(names[:SHOWN_NAMES]) + more


def check_coordinator(client, environment: Mapping[str, str] | None, what: str) -> None:
    """Before sending a non-empty ``environment`` to a coordinator: refused, nothing sent, if it is older than
    recorded environments (no ``GET /version``, or one that does not say it records them). ``what``: "submitted",
    "resumed"."""
    if not environment or not isinstance(client, HttpClient):     # a store: this version records it itself
        return
    try:
        about = client.call("GET", "/version")
    except Answered as exc:
        if exc.status != 404:
            raise
        about = None
    if isinstance(about, dict) and about.get("recordsEnvironment") is True:
        return
    raise Refused(f"the coordinator at {client.base} is older than this seatide command: it does not record the "
                  f"environment a job's ${{NAME}}s fall back to, and would fill {_names(environment)} from its own "
                  f"environment instead of this shell's. Nothing was {what}. {HOW_TO_FIX}", EXIT_FAILED)


def confirm_recorded(client, environment: Mapping[str, str] | None, answer: dict) -> None:
    """After a submit or resume that sent a non-empty ``environment``: the answer must say every name was recorded.
    If it does not, the coordinator that answered is older (a cluster in the middle of an upgrade): the job is
    canceled at once, and ``Refused`` says so."""
    if not environment or answer.get("environmentRecorded") == len(environment):
        return
    job_id = answer.get("jobId")
    base = getattr(client, "base", "the cluster")
    try:
        client.call("POST", "/stop-job", {"jobId": job_id})
        done = (f"Job {job_id} was canceled at once (seatide status {job_id} shows it; had its driver started "
                "already, it ran with the coordinator's values until the cancel reached it)")
    except Refused as exc:
        done = (f"Canceling job {job_id} failed ({exc}): cancel it now, seatide cancel {job_id} --cluster {base}, "
                "before it runs with the coordinator's values")
    said = answer.get("environmentRecorded")
    heard = ("did not say it recorded them: it is older than this seatide command (another coordinator of a cluster "
             "in the middle of an upgrade may have answered than the one asked first)" if said is None else
             f"recorded {said} of {len(environment)}")
    raise Refused(f"the coordinator at {base} was sent the environment of job {job_id}'s ${{NAME}}s "
                  f"({_names(environment)}) and {heard}; the job would read them from that coordinator's environment "
                  f"instead of this shell's. {done}. {HOW_TO_FIX}", EXIT_FAILED)

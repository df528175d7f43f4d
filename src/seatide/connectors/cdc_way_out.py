"""The way out a CDC source names when it cannot go on without losing or repeating changes.

Resuming the job would read the same checkpointed position again and stop at the same place
(``seatide resume --fallback fresh`` starts over only pipelines whose checkpoint cannot be
restored), so the way out is a new job: it takes a new snapshot and streams from there.
"""

START_OVER = ("start the job over as a new job, which copies the tables again with startup.mode = \"initial\": "
              "submit it again (`seatide run JOB.conf` or `seatide submit JOB.conf`); resuming this job would "
              "stop at the same place")

"""The way out a CDC source names when it cannot go on without losing or repeating changes.

Resuming the job from the same checkpoint would read the same position again and stop at the same
place, so the way out is a new start: a new job takes a new snapshot and streams from there. Where
a resume can tell before it is recorded that the position is gone from the server (a dropped slot, a
purged binlog file: ``Source.position_gone``), that checkpoint cannot be used, and ``seatide resume
--fallback fresh`` starts those pipelines over too (the resume's refusal says so,
``store/unusable_checkpoints.py``).
"""

START_OVER = ("start the job over as a new job, which copies the tables again with startup.mode = \"initial\": "
              "submit it again (`seatide run JOB.conf` or `seatide submit JOB.conf`); resuming this job from the "
              "same checkpoint would stop at the same place")

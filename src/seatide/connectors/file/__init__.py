"""LocalFile source and sink: SeaTunnel's file connectors on the local filesystem.

``source`` reads with Spark's file sources (batch, or a file stream in checkpointed jobs);
``sink`` writes each micro-batch through a staging directory and publishes it exactly once
(``writer``). ``formats``, ``naming``, ``listing`` and ``reading`` hold the pieces both share.
"""

"""The jobs the sensors request, by name (``definitions.py`` defines them), and the tags of the
runs that commit to standby groups.

Names rather than job objects keep the layering one way: definitions.py imports the sensors, never
the reverse.
"""

SYNC_JOB = "offset_sync_cycle"
CONTINUOUS_JOB = "offset_sync_continuous"
FAST_FORWARD_JOB = "offset_fast_forward"
AUDIT_JOB = "offset_failover_audit_job"
MIRROR_CHECK_JOB = "offset_mirror_check"

#: Dagster's concurrency pool of every asset that commits to standby groups (the interval cycle's, the
#: continuous run's, the fast-forward's): deploy/dagster.yaml limits it to one run at a time.
SYNC_POOL = "offset_sync"

#: Every run that commits to standby groups carries this tag: the run queue (deploy/dagster.yaml)
#: admits one such run at a time, manual launches included.
SYNC_CONCURRENCY_TAG = "offset_pipeline/sync"
# Dagster's run monitoring (deploy/dagster.yaml) fails a run still going after this long: a cycle
# takes seconds, and a run worker killed mid-cycle would otherwise hold the sync sensor for ever.
SYNC_MAX_RUNTIME_TAGS = {"dagster/max_runtime": "300"}

#: A continuous run syncs for OFFSET_PIPELINE_CONTINUOUS_RUN_S (default 900 s) and then ends; run
#: monitoring fails one still going this long after its start (the first cycle and the last
#: checkpoint included): a worker that hangs holds the sync for at most this long.
CONTINUOUS_MAX_RUNTIME_MARGIN_S = 600

"""What an in-process Dagster run has logged so far, read while it runs (from another thread): how a
fault test knows the run has met the fault, rather than sleeping and hoping it did."""

from __future__ import annotations

import dagster as dg

#: The continuous run's warning for a cluster that stopped answering (continuous/loop.py)
CLUSTER_UNAVAILABLE = "offset-sync cluster unavailable:"


def logged(instance: dg.DagsterInstance, text: str) -> bool:
    """Whether the newest run of ``instance`` (an ephemeral one, given to ``dg.materialize``) has
    logged a message containing ``text``. The event log keeps every level, whatever the console
    logger's."""
    return times_logged(instance, text) > 0


def times_logged(instance: dg.DagsterInstance, text: str) -> int:
    """How many messages of the newest run of ``instance`` contain ``text`` so far."""
    runs = instance.get_runs(limit=1)
    return sum(text in (entry.user_message or "") for entry in instance.all_logs(runs[0].run_id)) if runs else 0


def request_stop(instance: dg.DagsterInstance) -> str:
    """Ask the newest run of ``instance`` to stop, as Dagster's Terminate does first (status
    CANCELING): a continuous run then ends at its next checkpoint, with its final checkpoint and
    materialization, instead of at the end of its ``run_for_s``. A test that has seen what it waited
    for ends the run this way. Returns the run's id."""
    [run] = instance.get_runs(limit=1)
    assert run.status == dg.DagsterRunStatus.STARTED, f"run {run.run_id} is {run.status}, not in flight"
    instance.report_run_canceling(run)
    return run.run_id

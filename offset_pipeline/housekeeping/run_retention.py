"""Dagster run retention: which finished runs to delete (a pure rule), and deleting them with
everything they left in ``DAGSTER_HOME``.

A sync run every 30 s leaves a run row, its event log (a SQLite shard per run, plus its asset
events in the index) and its captured stdout/stderr; Dagster keeps all of it forever. The rule:

* a run that has not finished (queued, starting, started, canceling) is never deleted;
* runs of the audit job are kept ``audit_days`` (default 400: one a day, and their metadata keeps
  each day's totals after ClickHouse has expired the day's rows);
* other successful runs (sync cycles, fast-forwards, manual materializations) ``success_days``
  (default 1);
* other failed or canceled runs ``failure_days`` (default 14): long enough to investigate.

Ages count from the run's end (its creation when it never started). Settings (environment):
``OFFSET_PIPELINE_RUN_RETENTION_SUCCESS_DAYS``, ``..._FAILURE_DAYS``, ``..._AUDIT_DAYS`` (days,
fractions allowed), ``..._MAX_RUNS_PER_TICK`` (default 500) and ``..._MAX_SECONDS_PER_TICK``
(default 30: below the sensor evaluation timeout).

:func:`delete_run_completely` is ``DagsterInstance.delete_run`` (the run row and its events) plus
what it leaves behind: the run's compute logs (``ComputeLogManager.delete_logs``) and, with SQLite
event storage, the run's event shard file (``<run_id>.db``), which ``delete_run`` empties but keeps,
and the run's asset check executions in the index, which it leaves too.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

import dagster as dg

from offset_pipeline.settings import positive_number

AUDIT_JOB = "offset_failover_audit_job"
DAY_S = 86_400.0

SUCCESS_DAYS_ENV = "OFFSET_PIPELINE_RUN_RETENTION_SUCCESS_DAYS"
FAILURE_DAYS_ENV = "OFFSET_PIPELINE_RUN_RETENTION_FAILURE_DAYS"
AUDIT_DAYS_ENV = "OFFSET_PIPELINE_RUN_RETENTION_AUDIT_DAYS"
MAX_RUNS_ENV = "OFFSET_PIPELINE_RUN_RETENTION_MAX_RUNS_PER_TICK"
MAX_SECONDS_ENV = "OFFSET_PIPELINE_RUN_RETENTION_MAX_SECONDS_PER_TICK"

FINISHED_OK = (dg.DagsterRunStatus.SUCCESS,)
FINISHED_BADLY = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


@dataclass(frozen=True)
class RunRetention:
    success_days: float = 1.0
    failure_days: float = 14.0
    audit_days: float = 400.0
    max_runs_per_tick: int = 500
    max_seconds_per_tick: float = 30.0


def run_retention(env: Mapping[str, str] | None = None) -> RunRetention:
    env = os.environ if env is None else env
    return RunRetention(
        success_days=positive_number(env, SUCCESS_DAYS_ENV, 1.0, unit="days"),
        failure_days=positive_number(env, FAILURE_DAYS_ENV, 14.0, unit="days"),
        audit_days=positive_number(env, AUDIT_DAYS_ENV, 400.0, unit="days"),
        max_runs_per_tick=positive_number(env, MAX_RUNS_ENV, 500, unit="runs", whole=True),
        max_seconds_per_tick=positive_number(env, MAX_SECONDS_ENV, 30.0),
    )


@dataclass(frozen=True)
class RunFacts:
    """What the rule looks at: plain values, so the rule is testable without an instance."""

    run_id: str
    job_name: str
    status: str  # DagsterRunStatus value, e.g. "SUCCESS"
    created_s: float
    ended_s: float | None = None


def keep_days(job_name: str, status: str, policy: RunRetention) -> float | None:
    """How many days a run is kept after it ended; None: kept (not finished, or unknown status)."""
    if job_name == AUDIT_JOB and status in {s.value for s in FINISHED_OK + FINISHED_BADLY}:
        return policy.audit_days
    if status in {s.value for s in FINISHED_OK}:
        return policy.success_days
    if status in {s.value for s in FINISHED_BADLY}:
        return policy.failure_days
    return None


def should_delete(run: RunFacts, now_s: float, policy: RunRetention) -> bool:
    days = keep_days(run.job_name, run.status, policy)
    if days is None:
        return False
    ended = run.ended_s if run.ended_s is not None else run.created_s
    return now_s - ended >= days * DAY_S


def runs_to_delete(runs: Iterable[RunFacts], now_s: float, policy: RunRetention) -> list[str]:
    return [r.run_id for r in runs if should_delete(r, now_s, policy)]


def _facts(record) -> RunFacts:
    run = record.dagster_run
    return RunFacts(run.run_id, run.job_name, run.status.value, record.create_timestamp.timestamp(), record.end_time)


def delete_run_completely(instance: dg.DagsterInstance, run_id: str) -> None:
    """The run, its event log, its compute logs and (SQLite) its event shard file."""
    instance.delete_run(run_id)
    instance.compute_log_manager.delete_logs(prefix=[run_id])
    storage = instance.event_log_storage
    _delete_check_executions(storage, run_id)
    shard_path = getattr(storage, "path_for_shard", None)  # SQLite event storage only
    if shard_path is not None:
        base = shard_path(run_id)
        for path in (base, f"{base}-wal", f"{base}-shm", f"{base}-journal"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        # The storage remembers which shards it created tables in; forget this one, so a later read
        # of the deleted run's events in this process finds an empty log instead of a missing table.
        initialized = getattr(storage, "_initialized_dbs", None)
        if isinstance(initialized, set):
            initialized.discard(run_id)


def _delete_check_executions(storage, run_id: str) -> None:
    """``delete_run`` leaves the run's asset check executions in the event index (Dagster 1.13):
    about 2 KB each, five per sync run, 28 MB a day that nothing would ever delete. Dagster has no
    public call for it, so its own table definition is used, on SQL storages only (SQLite and
    PostgreSQL); tests/housekeeping/test_run_retention.py notices if a Dagster upgrade moves it."""
    has_table = getattr(storage, "has_table", None)
    index_connection = getattr(storage, "index_connection", None)
    if has_table is None or index_connection is None or not has_table("asset_check_executions"):
        return
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable

    with index_connection() as conn:
        conn.execute(AssetCheckExecutionsTable.delete().where(AssetCheckExecutionsTable.c.run_id == run_id))


@dataclass
class RetentionPass:
    """What one pass deleted (counts by job and status), and why it stopped."""

    deleted: Counter = field(default_factory=Counter)
    scanned: int = 0
    stopped_by: str = "done"  # done | max_runs | max_seconds
    oldest_deleted_s: float | None = None
    newest_deleted_s: float | None = None

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def summary(self) -> dict:
        return {
            "deleted": self.total,
            "by_job_status": {f"{job}:{status}": n for (job, status), n in sorted(self.deleted.items())},
            "scanned": self.scanned,
            "stopped_by": self.stopped_by,
            "oldest_deleted": _iso(self.oldest_deleted_s),
            "newest_deleted": _iso(self.newest_deleted_s),
        }


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="seconds")


_PAGE = 200


def apply_run_retention(instance: dg.DagsterInstance, now_s: float, policy: RunRetention) -> RetentionPass:
    """Delete the runs :func:`should_delete` names, oldest first, at most ``max_runs_per_tick`` runs
    and ``max_seconds_per_tick`` seconds; the rest waits for the next pass.

    One scan per outcome (succeeded; failed or canceled), each over runs created before the
    shortest keep of that outcome, oldest first: the runs it keeps there (audit runs) are few, so
    a pass always reaches the deletable ones."""
    done = RetentionPass()
    started = time.monotonic()
    for statuses, shortest in ((FINISHED_OK, min(policy.success_days, policy.audit_days)),
                               (FINISHED_BADLY, min(policy.failure_days, policy.audit_days))):
        filters = dg.RunsFilter(statuses=list(statuses),
                                created_before=datetime.fromtimestamp(now_s - shortest * DAY_S, tz=timezone.utc))
        cursor = None  # the newest run kept so far: a deleted run cannot be a cursor
        while True:
            # Storage order (insertion, i.e. creation), ascending: the order cursors page in.
            records = instance.get_run_records(filters=filters, limit=_PAGE, ascending=True, cursor=cursor)
            for record in records:
                done.scanned += 1
                facts = _facts(record)
                if not should_delete(facts, now_s, policy):
                    cursor = facts.run_id
                    continue
                if done.total >= policy.max_runs_per_tick:
                    done.stopped_by = "max_runs"
                    return done
                if time.monotonic() - started >= policy.max_seconds_per_tick:
                    done.stopped_by = "max_seconds"
                    return done
                delete_run_completely(instance, facts.run_id)
                done.deleted[(facts.job_name, facts.status)] += 1
                ended = facts.ended_s if facts.ended_s is not None else facts.created_s
                done.oldest_deleted_s = ended if done.oldest_deleted_s is None else min(done.oldest_deleted_s, ended)
                done.newest_deleted_s = ended if done.newest_deleted_s is None else max(done.newest_deleted_s, ended)
            if len(records) < _PAGE:
                break
    return done

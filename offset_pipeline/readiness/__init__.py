"""Readiness to switch a consumer group to its standby, and the planned switchover.

See docs/concepts/readiness.md (verdicts) and docs/operating/runbook.md (moving a group).

``rules.py`` decides, per group and direction, whether switching now is safe, what it would cost
and why not (pure); ``current.py`` which of the stored verdicts are in force (pure).
"""

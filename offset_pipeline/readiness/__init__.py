"""Readiness to switch a consumer group to its standby, and the planned switchover (issue 16).

``rules.py`` decides, per group and direction, whether switching now is safe, what it would cost
and why not (pure); ``current.py`` which of the stored verdicts are in force (pure).
"""

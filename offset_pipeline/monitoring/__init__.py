"""Monitoring (docs/operating/monitoring.md): per-cycle sync metrics and statuses, pure rules in ``metric_rules``."""

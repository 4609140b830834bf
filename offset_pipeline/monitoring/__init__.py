"""Monitoring (DESIGN.md §7): per-cycle sync metrics and statuses, pure rules in ``metric_rules``."""

"""Historical offset audits (docs/operating/audits.md): what a failover at a past moment would have cost."""

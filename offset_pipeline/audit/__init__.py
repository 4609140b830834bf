"""Historical offset audits (issue 6): what a failover at a past moment would have cost."""

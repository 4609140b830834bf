"""The sync cycle, monitoring and audit assets (added by later issues)."""

all_assets: list = []

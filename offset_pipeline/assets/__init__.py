"""The sync cycle's assets (monitoring and audit assets come with later issues)."""

from offset_pipeline.assets.snapshot import offset_snapshot

all_assets: list = [offset_snapshot]

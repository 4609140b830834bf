"""The sync cycle's assets (monitoring and audit assets come with later issues)."""

from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations

all_assets: list = [offset_snapshot, offset_translations, offset_standby_commits]

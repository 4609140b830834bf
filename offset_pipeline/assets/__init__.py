"""The sync cycle's assets and its monitoring rows (audit assets come with a later issue)."""

from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.assets.metrics import offset_sync_metrics
from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations

all_assets: list = [offset_snapshot, offset_translations, offset_standby_commits, offset_sync_metrics]

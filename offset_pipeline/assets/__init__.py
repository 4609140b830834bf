"""The sync cycle's assets, its monitoring rows, the stale-partition fast-forward, the failover audits,
and the mirror check."""

from offset_pipeline.assets.audit import offset_failover_audit
from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.assets.fast_forward import offset_fast_forwards
from offset_pipeline.assets.metrics import offset_sync_metrics
from offset_pipeline.assets.mirror_check import offset_mirror_proofs
from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations

all_assets: list = [offset_snapshot, offset_translations, offset_standby_commits, offset_sync_metrics,
                   offset_continuous_sync, offset_fast_forwards, offset_failover_audit, offset_mirror_proofs]

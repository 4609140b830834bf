"""Pure translation rules for the offset sync: facts in, one result out.

The rules are explained in docs/concepts/strategies.md, their no-loss arguments in
docs/concepts/no-loss.md and their statuses in docs/concepts/statuses.md.

No Kafka, Spark or Dagster imports here: plain Python, so the rules can be tested exhaustively
against the pure two-cluster model in :mod:`devstack.two_cluster_model`.
"""

from .caught_up import caught_up_problem, kept_point_problem, translate_caught_up, translate_kept_caught_up
from .direction import DirectionBasis, DirectionDecision, DirectionHistory, GroupSideFacts, decide_direction
from .facts import (
    DEFAULT_STALE_WINDOW_S,
    CaughtUpFacts,
    CaughtUpPoint,
    OffsetSyncFacts,
    PartitionFacts,
    RecordFact,
    SyncPair,
    TimestampFacts,
    TimestampType,
)
from .header_anchor import translate_by_header_anchor
from .offset_sync import OffsetSync, OffsetSyncProblem, decode_offset_sync, offset_syncs_topic
from .offset_sync_anchor import offset_sync_proof, translate_by_offset_sync
from .headers import (
    LOCAL,
    ORIGIN_CLUSTER_HEADER,
    ORIGIN_OFFSET_HEADER,
    CopiedFrom,
    HeaderProblem,
    LocalRecord,
    MalformedHeader,
    Origin,
    origin_headers,
    parse_origin,
)
from .result import Anchor, Strategy, TranslationResult, TranslationStatus, untranslatable
from .safe_bound import safe_standby_bound
from .shape import HeaderObservation, ShapeKind, ShapeSource, TopicShape, decide_shape, parse_shape
from .timestamp_search import translate_by_timestamp
from .translate import (
    NoLossViolation,
    check_no_loss,
    decision_log_line,
    parse_decision_log_line,
    translate_partition,
)

__all__ = [
    "Anchor",
    "CaughtUpFacts",
    "CaughtUpPoint",
    "CopiedFrom",
    "DEFAULT_STALE_WINDOW_S",
    "DirectionBasis",
    "DirectionDecision",
    "DirectionHistory",
    "GroupSideFacts",
    "HeaderObservation",
    "HeaderProblem",
    "LOCAL",
    "LocalRecord",
    "MalformedHeader",
    "NoLossViolation",
    "OffsetSync",
    "OffsetSyncFacts",
    "OffsetSyncProblem",
    "ORIGIN_CLUSTER_HEADER",
    "ORIGIN_OFFSET_HEADER",
    "Origin",
    "PartitionFacts",
    "RecordFact",
    "ShapeKind",
    "ShapeSource",
    "SyncPair",
    "Strategy",
    "TimestampFacts",
    "TimestampType",
    "TopicShape",
    "TranslationResult",
    "TranslationStatus",
    "caught_up_problem",
    "kept_point_problem",
    "check_no_loss",
    "decide_direction",
    "decide_shape",
    "decision_log_line",
    "decode_offset_sync",
    "offset_sync_proof",
    "offset_syncs_topic",
    "origin_headers",
    "parse_decision_log_line",
    "parse_origin",
    "parse_shape",
    "safe_standby_bound",
    "translate_by_header_anchor",
    "translate_by_offset_sync",
    "translate_by_timestamp",
    "translate_caught_up",
    "translate_kept_caught_up",
    "translate_partition",
    "untranslatable",
]

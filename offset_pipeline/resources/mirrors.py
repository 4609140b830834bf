"""Where each data mirror keeps its source positions, as a Dagster resource.

The stale-partition sensor and the fast-forward job need to know that a mirror has copied
everything (docs/operating/fast-forward.md). Per direction, the positions are kept either

* as the committed offsets of a consumer group (``group_id``): the devstack's Python mirror commits
  them on its *target* cluster in the transactions of its copies, under
  ``offset-pipeline-mirror.<source>-to-<target>`` (the default here); or
* as MirrorMaker 2's source offsets in a Kafka Connect offsets topic (``offsets_topic``, on the
  flow's target cluster; ``kafka_io/connect_offsets.py``), carried over the target's own copies
  that follow them on the source, which MirrorMaker 2 drops without recording an offset
  (``kafka_io/copied_through.py``).

``OFFSET_PIPELINE_MIRROR_POSITIONS`` sets them (``settings.mirror_position_groups``). A direction
without an entry has no known position, and its partitions are never fast-forwarded
(``mirror_position_unknown``). An offsets topic that cannot be read raises
:class:`MirrorPositionsUnreadable` naming why: the sensor logs it and leaves those partitions
``mirror_position_unknown``, the fast-forward job records it as the group's failure.

What a positions group must be: committed with the copies (the devstack mirror's transactions) or
after them (an at-least-once mirror), never ahead: a position is read as "every record below it has
its copy on the target", the fact the fast-forward's NO-LOSS proof rests on. Whether the mirror runs
is not read, and need not be (``stale_candidates`` works the stopped-mirror cases through): a position
behind a source log end that has not moved for the window is ``mirror_stopped``, and a position at the
end proves the copies whether or not the mirror still runs. Membership is no evidence either way: the
devstack mirror's positions group never has members (it assigns its partitions itself and commits
through its producer's transactions), running or not. An idle devstack mirror never commits, so its
positions of a partition quiet for longer than the target's ``offsets.retention.minutes`` (7 days by
default) expire: ``mirror_position_unknown`` until the partition sees a record again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg
from pydantic import Field

from offset_pipeline.kafka_io.connect_offsets import read_connect_offsets
from offset_pipeline.kafka_io.copied_through import copied_through
from offset_pipeline.kafka_io.mirror_positions import read_mirror_positions
from offset_pipeline.settings import kafka_timeout_s


class MirrorPositionsUnreadable(Exception):
    """A mirror's positions could not be read; the message says why."""


class MirrorPositionGroup(dg.Config):
    """The mirror copying ``source`` to ``target`` keeps its positions on ``stored_on``: as the
    consumer group ``group_id``, or (MirrorMaker 2) in the Connect offsets topic ``offsets_topic``.
    Exactly one of the two is given."""

    source: str
    target: str
    stored_on: str
    group_id: str | None = None
    offsets_topic: str | None = None


class MirrorsResource(dg.ConfigurableResource):
    """The position groups of the data mirrors, one per direction."""

    position_groups: list[MirrorPositionGroup] = []
    timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)  # OFFSET_PIPELINE_KAFKA_TIMEOUT_S

    def group_for(self, source: str, target: str) -> MirrorPositionGroup | None:
        return next((g for g in self.position_groups if (g.source, g.target) == (source, target)), None)

    def positions(
        self, clusters: Mapping[str, object], source: str, target: str, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the ``source``->``target`` mirror's position on ``source`` (absent:
        unknown). ``clusters``: cluster name -> KafkaClusterResource."""
        group = self.group_for(source, target)
        if group is None:
            return {}
        if group.stored_on not in clusters:
            raise ValueError(f"mirror positions of {source}->{target} are on {group.stored_on!r}, which is not a cluster here")
        if (group.group_id is None) == (group.offsets_topic is None):
            raise ValueError(f"mirror positions of {source}->{target}: give exactly one of group_id and offsets_topic")
        conf = clusters[group.stored_on].client_config()
        if group.group_id is not None:
            return read_mirror_positions(conf, group.group_id, partitions, timeout_s=self.timeout_s)
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        if source not in clusters:
            raise ValueError(f"the {source}->{target} mirror's source {source!r} is not a cluster here")
        read = read_connect_offsets(conf, group.stored_on, group.offsets_topic, source, timeout_s=self.timeout_s)
        if read.unreadable is not None:
            raise MirrorPositionsUnreadable(f"MirrorMaker 2's offsets topic: {read.unreadable}")
        stored = {tp: read.positions[tp] for tp in wanted if tp in read.positions}
        return copied_through(clusters[source].client_config(), source, target, wanted, stored,
                              timeout_s=self.timeout_s)

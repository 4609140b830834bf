"""The independent no-loss checker's Kafka side: reads committed offsets (standby first, then
active: the pair a failover at that moment would use) and the records around them, then judges with
``rules.no_loss_verdict``. It uses confluent-kafka only: nothing from ``offset_pipeline``.

Each round takes the next ``partitions_per_round`` partitions of a seeded rotation and checks every
group reading them (a partition's records are read once per cluster for all its groups), so over
the soak every group-partition is sampled in turn.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from bench.soak.rules import CheckerTotals, Rec, no_loss_verdict, rec_from_headers


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    active: str
    topics: tuple[str, ...]


class RangeReader:
    """Bounded reads of ``[start, end)`` of a partition, read_committed, with headers."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0):
        self.timeout_s = timeout_s
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"soak-checker-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "enable.partition.eof": True, "log_level": 0, "socket.timeout.ms": 10000,
            "fetch.wait.max.ms": 50,  # ranges end near the log end: do not wait there for more data
        })

    def watermarks(self, topic: str, partition: int, attempts: int = 5) -> tuple[int, int]:
        for attempt in range(attempts):
            try:
                return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout_s)
            except KafkaException as exc:
                # a topic this client has no metadata for yet: known after the next refresh
                if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or attempt == attempts - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def read(self, topic: str, partition: int, start: int, end: int) -> list[Rec]:
        if end <= start:
            return []
        self.consumer.assign([TopicPartition(topic, partition, start)])
        out: list[Rec] = []
        deadline = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < deadline:
                msg = self.consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if (msg.error().code() == KafkaError._PARTITION_EOF and msg.topic() == topic
                            and msg.partition() == partition):
                        break
                    continue
                if msg.topic() != topic or msg.partition() != partition:
                    continue  # fetched for the previous assignment before it was replaced
                if msg.offset() >= end:
                    break
                out.append(rec_from_headers(msg.offset(), msg.headers()))
                if msg.offset() >= end - 1:
                    break
            else:
                raise TimeoutError(f"reading {topic}[{partition}] {start}..{end} took over {self.timeout_s}s")
        finally:
            self.consumer.unassign()
        return out

    def close(self) -> None:
        self.consumer.close()


class NoLossChecker:
    def __init__(self, bootstraps: dict[str, str], groups: list[GroupInfo], partitions: int, seed: int,
                 partitions_per_round: int = 20, window: int = 300):
        self.bootstraps = bootstraps
        self.groups = groups
        self.partitions = partitions
        self.readers: dict[str, RangeReader] = {}
        self._new_clients()
        tps = sorted({(t, p) for g in groups for t in g.topics for p in range(partitions)})
        random.Random(f"{seed}:soak-checker").shuffle(tps)
        self.rotation = tps
        self.next = 0
        self.per_round = partitions_per_round
        self.window = window
        self.totals = CheckerTotals()

    def _group_offsets(self, cluster: str, group_ids: list[str]) -> dict[str, dict[tuple[str, int], int]]:
        """Committed offsets of each group, one at a time, by a consumer carrying the group's id that
        never subscribes (an OffsetFetch: it never joins, so the group gets no member). Not the
        admin API: 50 concurrent list_consumer_group_offsets calls, mostly for standby groups not
        yet created, crashed this process in librdkafka (``rd_kafka_enq_once_del_source_return:
        Assertion `eonce->refcnt > 0' failed``)."""
        by_id = {g.group_id: g for g in self.groups}
        out = {}
        for group_id in group_ids:
            wanted = [TopicPartition(t, p) for t in by_id[group_id].topics for p in range(self.partitions)]
            consumer = Consumer({"bootstrap.servers": self.bootstraps[cluster], "group.id": group_id,
                                 "enable.auto.commit": False, "log_level": 0, "socket.timeout.ms": 10000})
            try:
                got = consumer.committed(wanted, timeout=10)
            finally:
                consumer.close()
            out[group_id] = {(tp.topic, tp.partition): tp.offset for tp in got if tp.offset is not None and tp.offset >= 0}
        return out

    def _last_copy_below(self, cluster: str, topic: str, p: int, c: int, origin: str,
                         log_start: int) -> tuple[int | None, set[int]]:
        """The largest ``Offset`` of a copy from ``origin`` on ``cluster`` below ``c`` (reading back in
        growing windows), and the ``Offset`` values of the copies read."""
        reader = self.readers[cluster]
        seen: set[int] = set()
        hi, size = c, self.window
        while hi > log_start:
            lo = max(log_start, hi - size)
            recs = reader.read(topic, p, lo, hi)
            copies = [r.origin_offset for r in recs if r.origin == origin and r.origin_offset is not None]
            seen.update(copies)
            if copies:
                return max(copies), seen
            hi, size = lo, size * 4
        return None, seen

    def round(self) -> None:
        picked = [self.rotation[(self.next + i) % len(self.rotation)] for i in range(self.per_round)]
        self.next = (self.next + self.per_round) % len(self.rotation)
        topics = {t for t, _ in picked}
        groups = [g for g in self.groups if topics & set(g.topics)]
        totals = self.totals
        totals.rounds += 1
        try:
            # t (standby) first, then c (active): c only grows, so the pair is what a failover at the
            # moment t was read would have used, up to the few milliseconds in between.
            t_of: dict[str, dict] = {}
            for cluster in self.bootstraps:
                ids = [g.group_id for g in groups if g.active != cluster]
                t_of.update(self._group_offsets(cluster, ids))
            c_of: dict[str, dict] = {}
            for cluster in self.bootstraps:
                ids = [g.group_id for g in groups if g.active == cluster]
                c_of.update(self._group_offsets(cluster, ids))
        except Exception as exc:  # noqa: BLE001 - a cluster down: this round checks nothing
            self._read_error("committed offsets", exc)
            return
        errors = 0
        for topic, p in picked:
            for g in groups:
                if topic not in g.topics:
                    continue
                active = g.active
                standby = next(n for n in self.bootstraps if n != active)
                t = t_of.get(g.group_id, {}).get((topic, p))
                c = c_of.get(g.group_id, {}).get((topic, p))
                totals.distinct.add((g.group_id, topic, p))
                if t is None or c is None:
                    totals.not_synced += 1
                    continue
                try:
                    self._check_one(g.group_id, topic, p, active, standby, t, c)
                except Exception as exc:  # noqa: BLE001 - a read failed (fault window): counted, not judged
                    self._read_error(f"{g.group_id} {topic}[{p}] t={t} c={c}", exc)
                    errors += 1
                    if errors >= 3:
                        return  # a cluster down: the rest of the round would wait on it too

    def _new_clients(self) -> None:
        """Fresh readers. After a cluster was stopped and started again, a long-lived client here kept
        timing out (a new one answered at once), so any failed read replaces them."""
        for reader in self.readers.values():
            try:
                reader.close()
            except Exception:  # noqa: BLE001 - a client of a cluster that was down
                pass
        self.readers = {n: RangeReader(b) for n, b in self.bootstraps.items()}

    def _read_error(self, what: str, exc: Exception) -> None:
        self._new_clients()
        self.totals.read_errors += 1
        if len(self.totals.read_error_examples) < 10:
            self.totals.read_error_examples.append(f"{time.strftime('%H:%M:%S')} {what}: {type(exc).__name__}: {exc}")

    def _check_one(self, group_id: str, topic: str, p: int, active: str, standby: str, t: int, c: int) -> None:
        s_low, _ = self.readers[standby].watermarks(topic, p)
        recs = self.readers[standby].read(topic, p, max(s_low, t - self.window), t)
        needs_copy = any(r.origin is None or r.origin == standby for r in recs)
        last_copy, direct = None, set()
        if needs_copy:
            a_low, _ = self.readers[active].watermarks(topic, p)
            last_copy, direct = self._last_copy_below(active, topic, p, c, standby, a_low)
        verdict = no_loss_verdict(active, standby, t, c, recs, direct, last_copy)
        totals = self.totals
        totals.checks += 1
        totals.records += verdict.checked
        totals.unidentified += verdict.unidentified
        if verdict.unsafe:
            totals.unsafe += 1
            if len(totals.unsafe_examples) < 20:
                totals.unsafe_examples.append({
                    "time": time.time(), "group": group_id, "topic": topic, "partition": p, "active": active,
                    "t": t, "c": c, "first": verdict.unsafe[:3],
                })

    def close(self) -> None:
        for reader in self.readers.values():
            reader.close()

"""One forward pass over a partition's records, as data and as a state machine, and the two ways to
run passes: one partition per consumer assignment (:func:`fetch_one`) or many partitions of one
cluster assigned to one consumer at once (:func:`fetch_many`), so one fetch request to a broker
serves them all instead of an assign / fetch / unassign round trip per partition.

A pass (:class:`RawRead`) reads the real records from ``start`` below ``end`` until ``stop(offsets)``
holds or the log is read to ``end`` (or to the partition's last stable offset, when that is lower).
:class:`PassState` takes the consumer's events for its partition one by one and decides when the
pass is complete; both fetches use it, so a partition read with others gets exactly the answer it
would get alone (the reading contract is in ``partition_records.py``):

* completion comes from what the consumer hands over, in order: a record at or after ``end``, the
  end-of-partition event (at the last stable offset), or ``stop``; never from ``position()``
  (librdkafka moves it past transaction markers before the records ahead of them are handed over,
  librdkafka#3400);
* a partition that reports nothing at all for a while may start above the last stable offset (an
  open transaction: no end-of-partition event comes), so the broker is asked for it;
* a transient error (a leader moving, a topic just created) is waited out within the bound; any
  other error of the partition fails that partition's pass only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# Errors that pass quickly, retried within the call's bound: right after a topic is created its
# leader may not be known yet; right after a broker restarts, a pooled consumer still holds the
# old leader epoch (FENCED_LEADER_EPOCH, "Leader epoch is older than broker epoch", until its
# metadata is refreshed) and a new leader may not offer offsets yet (OFFSET_NOT_AVAILABLE). Without
# these, the first cycle after a broker's return read some partitions as cluster_unavailable.
TRANSIENT = {
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE,
}
BATCH = 500
# A pass that got nothing for this long asks the broker for the last stable offset. Short: the
# consumer fetches back to back meanwhile. Too short only costs a needless request.
STALL_S = 0.05
# With many partitions per fetch the first answer for all of them can take longer than one
# partition's: a partition is asked about only after this long without any event of its own.
MANY_STALL_S = 0.25
MANY_BATCH = 5000


@dataclass(frozen=True, eq=False)
class RawRead:
    """A pass to run: ``side`` and ``conf`` name the consumer (a cluster's client config);
    ``identities``: keep each record's key and value too (a header-less mirror)."""

    side: str
    conf: dict | None
    topic: str
    partition: int
    start: int
    end: int
    stop: Callable[[list[int]], bool] | None
    deadline: float
    read_from: str = ""
    identities: bool = False
    stats: Any = None  # a partition_records.ReadStats: stable_offset_queries is counted

    def describe(self) -> str:
        return f"{self.topic}[{self.partition}] on {self.read_from or self.side} from {self.start}"


@dataclass(frozen=True)
class RawReadResult:
    """``raw``: ``(offset, timestamp, headers)`` (plus key, value with ``identities``) of every real
    record read, in offset order; every real record of ``[start, upto)`` is in it. ``stable_end``:
    the last stable offset when the pass learned one below its ``end`` (later passes stop there)."""

    raw: list[tuple]
    upto: int
    stable_end: int | None = None


def retry(call, deadline: float):
    """``call()``, retried while it raises a transient Kafka error and the deadline is not past."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            if exc.args[0].code() not in TRANSIENT or time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def stable_offset(consumer: Consumer, tp: TopicPartition, deadline: float) -> int:
    """The last stable offset (a read_committed consumer's high watermark), asked of the broker."""
    remaining = max(1.0, deadline - time.monotonic())
    _, high = retry(lambda: consumer.get_watermark_offsets(tp, timeout=remaining, cached=False), deadline)
    return high


@dataclass(eq=False)
class PassState:
    """One pass in progress: :meth:`take` each event of its partition; ``result`` or ``error`` is set
    once the pass is complete (``done``)."""

    req: RawRead
    offsets: list[int] = field(default_factory=list)
    raw: list[tuple] = field(default_factory=list)
    result: RawReadResult | None = None
    error: BaseException | None = None
    last_event: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None

    def _finish(self, upto: int, stable_end: int | None = None) -> bool:
        self.result = RawReadResult(self.raw, upto, stable_end)
        return True

    def take(self, msg) -> bool:
        """One event of the partition (or a consumer-wide error); True when the pass is complete."""
        req = self.req
        error = msg.error()
        if error is not None:
            code = error.code()
            if code == KafkaError._PARTITION_EOF:
                # Every real record below the last stable offset has been handed over.
                end_of_log = msg.offset()
                return self._finish(min(max(end_of_log, req.start), req.end),
                                    end_of_log if end_of_log < req.end else None)
            if code in TRANSIENT:
                return False
            self.error = KafkaException(error)
            return True
        offset = msg.offset()
        if offset >= req.end:
            return self._finish(req.end)  # every record below end came before it
        self.offsets.append(offset)
        if req.identities:
            self.raw.append((offset, msg.timestamp()[1], msg.headers(), msg.key(), msg.value()))
        else:
            self.raw.append((offset, msg.timestamp()[1], msg.headers()))
        if req.stop is not None and req.stop(self.offsets):
            return self._finish(offset + 1)
        return False

    def check_stalled(self, consumer: Consumer, deadline: float) -> bool:
        """Nothing came for a while: the pass may start above the last stable offset (an open
        transaction), where no end-of-partition is reported. Ask the broker; True when complete."""
        req = self.req
        if req.stats is not None:
            req.stats.stable_offset_queries += 1
        upto = max(req.start, self.offsets[-1] + 1) if self.offsets else req.start
        stable = stable_offset(consumer, TopicPartition(req.topic, req.partition), deadline)
        self.last_event = time.monotonic()
        if stable <= upto:
            return self._finish(min(upto, req.end), stable)
        return False

    def timeout_error(self) -> TimeoutError:
        req = self.req
        return TimeoutError(
            f"reading {req.describe()} did not reach offset {req.end} in time "
            f"(last record read: {self.offsets[-1] if self.offsets else None})"
        )


def fetch_one(consumer: Consumer, req: RawRead) -> RawReadResult:
    """The pass ``req`` with ``consumer`` assigned its partition alone (raises the pass's error)."""
    state = PassState(req)
    tp = (req.topic, req.partition)
    consumer.assign([TopicPartition(req.topic, req.partition, req.start)])
    try:
        while not state.done:
            # Take what has arrived; when nothing has, wait for the next fetch (not for a full batch).
            batch = consumer.consume(BATCH, timeout=0)
            if not batch:
                first = consumer.poll(max(0.0, min(STALL_S, req.deadline - time.monotonic())))
                batch = [first] if first is not None else []
            for msg in batch:
                if msg.topic() is not None and (msg.topic(), msg.partition()) != tp:
                    continue  # (a pooled consumer never hands over another partition's events; be sure)
                if state.take(msg):
                    break
            if not batch and not state.done:
                state.check_stalled(consumer, req.deadline)
            if not state.done and time.monotonic() > req.deadline:
                raise state.timeout_error()
    finally:
        consumer.unassign()
    if state.error is not None:
        raise state.error
    return state.result


def fetch_many(consumer: Consumer, reqs: list[RawRead], timeout_s: float) -> list[RawReadResult | BaseException]:
    """The passes ``reqs`` (distinct partitions of the consumer's cluster) with all their partitions
    assigned to ``consumer`` at once; a partition is handed back as soon as its pass is complete.
    One answer per request, in order: its result, or the exception that failed that pass alone
    (its own error, or a ``TimeoutError`` when ``timeout_s`` passed first)."""
    states = {(r.topic, r.partition): PassState(r) for r in reqs}
    if len(states) != len(reqs):
        raise ValueError("fetch_many: one pass per partition")
    deadline = time.monotonic() + timeout_s
    open_states = dict(states)
    consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in reqs])
    try:
        while open_states:
            batch = consumer.consume(MANY_BATCH, timeout=0)
            if not batch:
                first = consumer.poll(max(0.0, min(STALL_S, deadline - time.monotonic())))
                batch = [first] if first is not None else []
            now = time.monotonic()
            finished: list[tuple[str, int]] = []
            for msg in batch:
                topic = msg.topic()
                if topic is None:  # a consumer-wide error: every open pass takes it
                    for key, state in open_states.items():
                        if not state.done:
                            state.last_event = now
                            if state.take(msg):
                                finished.append(key)
                    continue
                # The common case, once per record read (hundreds of thousands per task): no list
                # of keys, no property call.
                key = (topic, msg.partition())
                state = open_states.get(key)
                if state is None or state.result is not None or state.error is not None:
                    continue  # a pass already complete: events still queued for it are not its
                state.last_event = now
                if state.take(msg):
                    finished.append(key)
            for key, state in open_states.items():
                if not state.done and now - state.last_event > MANY_STALL_S:
                    try:
                        if state.check_stalled(consumer, deadline):
                            finished.append(key)
                    except KafkaException as exc:
                        state.error = exc
                        finished.append(key)
            if finished:
                # Hand the complete ones back at once: a partition at its end would be fetched back
                # to back (fetch.wait.max.ms = 0) while the others are still read.
                consumer.incremental_unassign([TopicPartition(*key) for key in finished])
                for key in finished:
                    open_states.pop(key, None)
            if open_states and time.monotonic() > deadline:
                for state in open_states.values():
                    state.error = state.timeout_error()
                break
    finally:
        consumer.unassign()
    return [states[(r.topic, r.partition)].error or states[(r.topic, r.partition)].result for r in reqs]

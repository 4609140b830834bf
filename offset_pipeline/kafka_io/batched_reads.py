"""Many partitions' translation reads run together, one request to each broker serving them all.

Each Kafka partition's reads are a generator (``partition_records.translation_fact_steps``) that
yields requests — a forward pass, an ``offsets_for_times`` lookup, a topic's metadata — and gets
their answers. Run alone (``drive``) every request is its own round trip: assign, fetch, unassign
per pass, one lookup call per searched timestamp. :func:`run_batched` runs many such generators in
lock-step rounds instead: in a round it takes every generator's next request and answers them per
cluster together —

* the passes of one cluster with ONE consumer assigned all their partitions at once
  (``record_pass.fetch_many``: one fetch request per broker carries every partition, and each is
  handed back when its pass is complete);
* the timestamp lookups of one cluster in ONE ``offsets_for_times`` call;
* the two clusters' work of a round at the same time (one thread per cluster: the calls wait on
  the network, not on Python).

Invariants (asserted in tests/kafka_io/test_batched_reads.py on real brokers):

* **Same facts.** A generator gets the same answers as alone: passes run by the same state machine
  (``record_pass.PassState``), lookups ask the same question. Its facts equal its facts read alone.
* **One partition's failure is its own.** An error of a partition's pass or lookup is raised inside
  that generator only (where its caller turns it into that partition's status); a failed call that
  served several (a timeout, a consumer error) is raised in each of them, never beyond the result.
* **Bounded.** Every round's calls are bounded by ``timeout_s``; a generator stops being served
  when it has returned or raised.
* A partition appears at most once per call: two requests for the same partition of one cluster
  in a round (the active pass of one direction, the standby pass of the other) go in turn.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from offset_pipeline.kafka_io.consumer_pool import ConfigKey, config_key
from offset_pipeline.kafka_io.partition_records import (
    CONSUMERS,
    TimestampLookup,
    TopicMetadataLookup,
    topic_metadata,
)
from offset_pipeline.kafka_io.record_pass import TRANSIENT, RawRead, fetch_many, retry


@dataclass
class _Pending:
    index: int
    steps: Generator
    request: Any


@dataclass
class BatchStats:
    rounds: int = 0
    fetch_calls: int = 0
    passes: int = 0
    lookup_calls: int = 0
    lookups: int = 0


class _Consumers:
    """One leased read consumer per client config for the whole run; a consumer whose call failed
    as a whole is discarded (its state is unknown) and the next round leases a fresh one."""

    def __init__(self):
        self._leases: dict[ConfigKey, Any] = {}

    def get(self, conf: dict, topics: set[str], deadline: float) -> Consumer:
        key = config_key(conf)
        if key not in self._leases:
            manager = CONSUMERS.lease(conf)
            lease = manager.__enter__()
            self._leases[key] = (manager, lease.consumer)
        consumer = self._leases[key][1]
        for topic in sorted(topics):
            consumer.know(topic, max(1.0, deadline - time.monotonic()))
        return consumer

    def discard(self, conf: dict, exc: BaseException) -> None:
        manager, _ = self._leases.pop(config_key(conf), (None, None))
        if manager is not None:
            manager.__exit__(type(exc), exc, exc.__traceback__)

    def close(self) -> None:
        for manager, _ in self._leases.values():
            manager.__exit__(None, None, None)
        self._leases = {}


def run_batched(steps: Sequence[Generator], *, timeout_s: float = 10.0,
                stats: BatchStats | None = None) -> list[Any]:
    """Each generator's return value, or the exception it raised, in order (see module doc)."""
    stats = stats if stats is not None else BatchStats()
    results: list[Any] = [None] * len(steps)
    pending: list[_Pending] = []

    def advance(item: _Pending, answer: Any, error: BaseException | None) -> None:
        try:
            item.request = item.steps.throw(error) if error is not None else item.steps.send(answer)
        except StopIteration as done:
            results[item.index] = done.value
        except Exception as exc:  # noqa: BLE001 - the partition's own failure, returned as its result
            results[item.index] = exc
        else:
            pending.append(item)

    for index, gen in enumerate(steps):
        advance(_Pending(index, gen, None), None, None)

    consumers = _Consumers()
    try:
        while pending:
            stats.rounds += 1
            round_items, pending = pending, []
            answers = _answer_round(round_items, consumers, timeout_s, stats)
            for item, (answer, error) in zip(round_items, answers):
                if answer is _LATER:
                    pending.append(item)  # its partition was in this round's call already
                else:
                    advance(item, answer, error)
    finally:
        consumers.close()
    return results


_LATER = object()


def _answer_round(items: list[_Pending], consumers: _Consumers, timeout_s: float,
                  stats: BatchStats) -> list[tuple[Any, BaseException | None]]:
    """One answer per item: ``(answer, None)``, ``(None, error)`` or ``(_LATER, None)``."""
    answers: list[tuple[Any, BaseException | None]] = [(_LATER, None)] * len(items)
    # Per cluster config and kind, the items whose partition is not yet in that call.
    calls: dict[tuple[ConfigKey, str], dict[tuple[str, int], int]] = {}
    confs: dict[ConfigKey, dict] = {}
    metadata: list[int] = []
    for i, item in enumerate(items):
        req = item.request
        if isinstance(req, TopicMetadataLookup):
            metadata.append(i)
            continue
        if not isinstance(req, (RawRead, TimestampLookup)):
            answers[i] = (None, TypeError(f"not a read request: {req!r}"))
            continue
        key = config_key(req.conf)
        confs[key] = req.conf
        kind = "pass" if isinstance(req, RawRead) else "lookup"
        call = calls.setdefault((key, kind), {})
        call.setdefault((req.topic, req.partition), i)  # a second one for the partition: next round

    def run_cluster(key: ConfigKey) -> None:
        conf = confs[key]
        for kind in ("pass", "lookup"):
            chosen = list(calls.get((key, kind), {}).values())
            if not chosen:
                continue
            reqs = [items[i].request for i in chosen]
            deadline = time.monotonic() + timeout_s
            try:
                consumer = consumers.get(conf, {r.topic for r in reqs}, deadline)
                if kind == "pass":
                    stats.fetch_calls += 1
                    stats.passes += len(reqs)
                    out = fetch_many(consumer, reqs, timeout_s)
                else:
                    stats.lookup_calls += 1
                    stats.lookups += len(reqs)
                    out = _lookup_many(consumer, reqs, deadline)
            except Exception as exc:  # noqa: BLE001 - the call as a whole failed: each of its partitions says so
                consumers.discard(conf, exc)
                out = [exc] * len(reqs)
            for i, answer in zip(chosen, out):
                answers[i] = (None, answer) if isinstance(answer, BaseException) else (answer, None)

    clusters = sorted(confs)
    if len(clusters) > 1:
        with ThreadPoolExecutor(max_workers=len(clusters), thread_name_prefix="batched-reads") as pool:
            list(pool.map(run_cluster, clusters))
    elif clusters:
        run_cluster(clusters[0])
    for i in metadata:  # rare (a topic missing on the standby): one call each
        req = items[i].request
        try:
            consumer = consumers.get(req.conf, set(), time.monotonic() + timeout_s)
            answers[i] = (topic_metadata(consumer, req.topic, timeout_s), None)
        except Exception as exc:  # noqa: BLE001 - this partition's failure
            answers[i] = (None, exc)
    return answers


def _lookup_many(consumer: Consumer, reqs: list[TimestampLookup], deadline: float) -> list[Any]:
    """``offsets_for_times`` of every request (distinct partitions) in one call; a partition with a
    transient error is asked again within the bound, any other error is that partition's."""
    out: list[Any] = [None] * len(reqs)
    todo = list(range(len(reqs)))
    while todo:
        remaining = max(1.0, deadline - time.monotonic())
        asked = [TopicPartition(reqs[i].topic, reqs[i].partition, reqs[i].timestamp) for i in todo]
        answers = retry(lambda asked=asked, remaining=remaining: consumer.offsets_for_times(asked, timeout=remaining),
                        deadline)
        by_partition = {(a.topic, a.partition): a for a in answers}
        again = []
        for i in todo:
            answer = by_partition.get((reqs[i].topic, reqs[i].partition))
            if answer is None:
                out[i] = KafkaException(f"offsets_for_times gave no answer for {reqs[i].topic}[{reqs[i].partition}]")
            elif answer.error is not None:
                if answer.error.code() in TRANSIENT and time.monotonic() < deadline:
                    again.append(i)
                else:
                    out[i] = KafkaException(answer.error)
            else:
                out[i] = answer.offset if answer.offset >= 0 else None
        todo = again
        if todo:
            time.sleep(0.25)
    return out

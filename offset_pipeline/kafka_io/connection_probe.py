"""What librdkafka reported while a cluster did not answer, turned into a named cause
(``kafka_io/connection_errors.py``).

librdkafka hands TLS, SASL and connection errors to the client's ``error_cb`` (served by ``poll``)
while the request that needed the connection just waits for its timeout. Two ways to get them:

* :func:`probe`: a fresh admin client with an :class:`ErrorRecorder`, one cluster description
  request, bounded by ``timeout_s`` and ended early once a decisive error (TLS, authentication,
  connection refused) is in: what ``offset-pipeline connections`` and ``KafkaClusterResource.describe``
  run;
* :func:`recent_failure`: the errors the process's shared admin client (``cluster_client.shared_admin``)
  recorded around a call that just failed, at no extra wait: what the snapshot's group listing runs.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from offset_pipeline.kafka_io.connection_errors import (
    ClientSettings,
    ConnectionCause,
    ConnectionDiagnosis,
    ReportedError,
    diagnose,
)

#: Error codes after which waiting longer tells nothing new: the probe stops there.
DECISIVE_CODES = frozenset({"_SSL", "_AUTHENTICATION", "_ALL_BROKERS_DOWN"})
#: librdkafka repeats an identical connection error at most every 30 s (it suppresses the repeats in
#: between): errors this recent still describe a failure that goes on.
RECENT_S = 45.0
#: Causes a failed call is explained by (a silent timeout explains nothing new).
EXPLAINING_CAUSES = frozenset(ConnectionCause) - {ConnectionCause.CONNECTED, ConnectionCause.NO_ANSWER}


class ErrorRecorder:
    """An ``error_cb``: keeps the last ``limit`` errors with the time they were served."""

    def __init__(self, limit: int = 100):
        self._errors: deque[tuple[float, ReportedError]] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def __call__(self, error: KafkaError) -> None:
        with self._lock:
            self._errors.append((time.monotonic(), ReportedError(error.name(), error.str())))

    def since(self, moment: float) -> list[ReportedError]:
        with self._lock:
            return [e for at, e in self._errors if at >= moment]

    def codes(self) -> set[str]:
        with self._lock:
            return {e.code for _, e in self._errors}


class ClusterConnectionError(RuntimeError):
    """A cluster could not be reached, for the named cause (the message names cluster and fix). From
    a child process (``kafka_io/isolated.py``) it comes back as text: :func:`explained` finds it."""

    def __init__(self, diagnosis: ConnectionDiagnosis):
        super().__init__(diagnosis.message)
        self.diagnosis = diagnosis


@dataclass(frozen=True)
class ProbeResult:
    diagnosis: ConnectionDiagnosis
    cluster_id: str | None = None
    broker_count: int = 0


def probe(admin_config: dict[str, Any], cluster: str, timeout_s: float) -> ProbeResult:
    """One cluster description request with a client of its own, at most ``timeout_s``; connected,
    or why not. Never raises for Kafka errors."""
    settings = ClientSettings.from_client_config(cluster, admin_config)
    recorder = ErrorRecorder()
    try:
        admin = AdminClient({**admin_config, "error_cb": recorder})
    except (KafkaException, ValueError, TypeError) as exc:  # e.g. ssl.ca.location that cannot be read
        return ProbeResult(diagnose(settings, [], client_error=str(exc.args[0] if exc.args else exc)))
    future = admin.describe_cluster(request_timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while not future.done() and time.monotonic() < deadline:
        admin.poll(0.1)  # serves error_cb
        if recorder.codes() & DECISIVE_CODES:
            break
    admin.poll(0)
    if future.done() and future.exception() is None:
        answer = future.result()
        return ProbeResult(diagnose(settings, [], answered=True), answer.cluster_id, len(answer.nodes))
    return ProbeResult(diagnose(settings, recorder.since(0.0), waited_s=timeout_s))


def recent_failure(admin: AdminClient, recorder: ErrorRecorder | None, admin_config: dict[str, Any],
                   cluster: str) -> ConnectionDiagnosis | None:
    """Why ``admin``'s call just failed, from the errors its recorder got in the last :data:`RECENT_S`;
    None when they explain nothing (no recorder, no error, or a silent timeout)."""
    if recorder is None:
        return None
    admin.poll(0)  # serves the error callbacks queued while the call waited
    diagnosis = diagnose(ClientSettings.from_client_config(cluster, admin_config),
                         recorder.since(time.monotonic() - RECENT_S))
    return diagnosis if diagnosis.cause in EXPLAINING_CAUSES else None


_MARKER = f"{ClusterConnectionError.__name__}: "


def explained(error: BaseException | str) -> str | None:
    """The diagnosis message a :class:`ClusterConnectionError` carried, also when it came back from a
    child process as text (``KafkaCallFailed``); None for any other error."""
    if isinstance(error, ClusterConnectionError):
        return error.diagnosis.message
    text = str(error)
    return text.split(_MARKER, 1)[1] if _MARKER in text else None

"""Why a Kafka cluster cannot be reached, from what librdkafka reported, as a named cause and a
message that says which cluster, what went wrong and which setting to fix.

Pure (no Kafka client): the input is the error codes and strings librdkafka gave its ``error_cb``
(``_SSL``, ``_AUTHENTICATION``, ``_TRANSPORT``, ``_ALL_BROKERS_DOWN``, ...) or the error of a client
that could not be created, and the cluster's connection settings; the output a
:class:`ConnectionDiagnosis`. librdkafka reports these only through the callback and its log: the
call itself (a metadata or admin request) just times out, which is all a user saw before.

The settings are named by the variables that set them (``OFFSET_PIPELINE_<CLUSTER>_...``,
``offset_pipeline/settings.py``), so the message says what to change; the password's value never
appears, only its variable's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class ConnectionCause(str, Enum):
    """Why a cluster did not answer. Values are stable names (shown in messages, tests, metadata)."""

    CONNECTED = "connected"
    CA_FILE_UNREADABLE = "ca_file_unreadable"  # the client could not load ssl.ca.location
    CLIENT_SETTINGS_INVALID = "client_settings_invalid"  # the client refused another setting
    TLS_UNTRUSTED = "tls_untrusted"  # the broker's certificate does not chain to the configured CA
    TLS_HANDSHAKE_FAILED = "tls_handshake_failed"  # any other TLS failure
    MECHANISM_NOT_ENABLED = "mechanism_not_enabled"  # the broker does not offer the SASL mechanism
    AUTHENTICATION_FAILED = "authentication_failed"  # wrong password, or no such user
    UNREACHABLE = "unreachable"  # no TCP connection (refused, no route, unknown host)
    PROTOCOL_MISMATCH = "protocol_mismatch"  # connected, then dropped before any answer: wrong protocol
    NO_ANSWER = "no_answer"  # nothing reported, no answer in time

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


@dataclass(frozen=True)
class ReportedError:
    """One error librdkafka reported: its code's name (``KafkaError.name()``) and its text."""

    code: str
    text: str


@dataclass(frozen=True)
class ClientSettings:
    """The connection settings of one cluster the messages refer to (no password)."""

    cluster: str
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    ssl_ca_location: str | None = None

    @classmethod
    def from_client_config(cls, cluster: str, config: Mapping[str, Any]) -> ClientSettings:
        """From librdkafka settings (``KafkaClusterResource.client_config()``)."""
        return cls(cluster, str(config.get("bootstrap.servers", "")),
                   str(config.get("security.protocol", "PLAINTEXT")).upper(),
                   config.get("sasl.mechanism") or None, config.get("sasl.username") or None,
                   config.get("ssl.ca.location") or None)

    def variable(self, setting: str) -> str:
        """The environment variable of ``setting`` (``SSL_CA_LOCATION``...) for this cluster."""
        return f"OFFSET_PIPELINE_{self.cluster.upper()}_{setting}"

    @property
    def where(self) -> str:
        return f"{self.cluster} ({self.bootstrap_servers})"


@dataclass(frozen=True)
class ConnectionDiagnosis:
    cluster: str
    cause: ConnectionCause
    message: str  # names the cluster, the cause, and the fix

    @property
    def connected(self) -> bool:
        return self.cause is ConnectionCause.CONNECTED

    def __str__(self) -> str:
        return self.message


_CERT_UNTRUSTED = re.compile(r"certificate verify failed|unable to get (local )?issuer certificate|"
                             r"self[- ]signed certificate|unknown ca", re.IGNORECASE)
_MECHANISM = re.compile(r"SASL (?P<mechanism>[\w-]+) mechanism handshake failed|Unsupported SASL mechanism|"
                        r"UNSUPPORTED_SASL_MECHANISM", re.IGNORECASE)
_OFFERED = re.compile(r"supported mechanisms: (?P<offered>[\w\-, ]+)", re.IGNORECASE)
_UNREACHABLE = re.compile(r"Connection refused|No route to host|Failed to resolve|Name or service not known|"
                          r"Network is unreachable|Connect to .* failed", re.IGNORECASE)
_BROKER_PREFIX = re.compile(r"^\S+://\S+/(\d+|bootstrap): ")
_AFTER = re.compile(r" \(after \d+ms in state \w+\)$")


def librdkafka_detail(text: str) -> str:
    """The reported text without the broker prefix and the connection-state suffix (one line)."""
    return _AFTER.sub("", _BROKER_PREFIX.sub("", text.strip())).splitlines()[0] if text.strip() else ""


def diagnose(settings: ClientSettings, reported: Iterable[ReportedError], *, client_error: str | None = None,
             answered: bool = False, waited_s: float | None = None) -> ConnectionDiagnosis:
    """The cause of a failed connection to ``settings.cluster`` from what was ``reported``.

    ``client_error``: the client could not be created (its error text); ``answered``: a request was
    answered (then the cluster is connected whatever was reported before); ``waited_s``: how long the
    request was given, for the message of a cluster that said nothing."""
    s = settings
    if client_error:
        return _client_error(s, client_error)
    if answered:
        return ConnectionDiagnosis(s.cluster, ConnectionCause.CONNECTED, f"{s.where}: connected")
    errors = list(reported)
    by_code: dict[str, list[str]] = {}
    for error in errors:
        by_code.setdefault(error.code, []).append(error.text)
    # The most specific first: a mechanism refusal is an _AUTHENTICATION error too; TLS errors come
    # back as _SSL and, for the same handshake, as _TRANSPORT.
    for text in by_code.get("_AUTHENTICATION", []):
        if _MECHANISM.search(text):
            return _mechanism_not_enabled(s, text)
    if by_code.get("_AUTHENTICATION"):
        return _authentication_failed(s, by_code["_AUTHENTICATION"][-1])
    tls = by_code.get("_SSL", []) + [t for t in by_code.get("_TRANSPORT", []) if "SSL routines" in t]
    if tls:
        return _tls_failed(s, tls[-1])
    transport = by_code.get("_TRANSPORT", []) + by_code.get("_RESOLVE", [])
    if any(_UNREACHABLE.search(t) for t in transport):
        text = next(t for t in reversed(transport) if _UNREACHABLE.search(t))
        return ConnectionDiagnosis(s.cluster, ConnectionCause.UNREACHABLE, (
            f"{s.where}: cannot connect: {librdkafka_detail(text)} — check {s.variable('BOOTSTRAP')} and that the "
            "brokers are up and reachable from this host"))
    if by_code.get("_ALL_BROKERS_DOWN") or transport:
        # Connected, then closed by the broker before any answer, with no TLS or SASL error: what
        # librdkafka shows when the client speaks another protocol than the listener (SSL to a
        # SASL_SSL listener, PLAINTEXT to a TLS one, ...).
        return ConnectionDiagnosis(s.cluster, ConnectionCause.PROTOCOL_MISMATCH, (
            f"{s.where}: the broker closed every connection before answering, with no TLS or SASL error — "
            f"{s.variable('SECURITY_PROTOCOL')} ({s.security_protocol}) probably does not match the listener "
            "at that address (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"))
    waited = f" within {waited_s:g}s" if waited_s is not None else ""
    return ConnectionDiagnosis(s.cluster, ConnectionCause.NO_ANSWER, (
        f"{s.where}: no answer{waited} and no connection error reported — the brokers may be overloaded, "
        f"paused or behind a firewall that drops packets; check {s.variable('BOOTSTRAP')}"))


def _client_error(s: ClientSettings, text: str) -> ConnectionDiagnosis:
    if "ssl.ca.location" in text or "ca.location" in text:
        return ConnectionDiagnosis(s.cluster, ConnectionCause.CA_FILE_UNREADABLE, (
            f"{s.where}: the CA file in {s.variable('SSL_CA_LOCATION')} ({s.ssl_ca_location}) cannot be loaded: "
            f"{librdkafka_detail(text)} — set it to a readable PEM file of the CA that signed the brokers' "
            "certificates"))
    return ConnectionDiagnosis(s.cluster, ConnectionCause.CLIENT_SETTINGS_INVALID, (
        f"{s.where}: the Kafka client refused its settings: {librdkafka_detail(text)} — check the "
        f"OFFSET_PIPELINE_{s.cluster.upper()}_* variables"))


def _tls_failed(s: ClientSettings, text: str) -> ConnectionDiagnosis:
    detail = librdkafka_detail(text)
    ca = s.variable("SSL_CA_LOCATION")
    if _CERT_UNTRUSTED.search(text):
        where_ca = (f"the CA in {ca} ({s.ssl_ca_location})" if s.ssl_ca_location
                    else f"a CA of this host's store ({ca} is unset)")
        return ConnectionDiagnosis(s.cluster, ConnectionCause.TLS_UNTRUSTED, (
            f"{s.where}: TLS handshake failed: the broker's certificate is not signed by {where_ca} — set "
            f"{'it' if s.ssl_ca_location else ca} to the PEM of the CA that signed the brokers' certificates "
            f"(librdkafka: {_CERT_UNTRUSTED.search(text).group(0)})"))
    if s.security_protocol not in ("SSL", "SASL_SSL"):
        hint = f"{s.variable('SECURITY_PROTOCOL')} is {s.security_protocol}: does the listener speak TLS?"
    else:
        hint = f"check {ca} and that the listener at {s.bootstrap_servers} speaks TLS"
    return ConnectionDiagnosis(s.cluster, ConnectionCause.TLS_HANDSHAKE_FAILED,
                               f"{s.where}: TLS handshake failed: {detail} — {hint}")


def _mechanism_not_enabled(s: ClientSettings, text: str) -> ConnectionDiagnosis:
    found = _MECHANISM.search(text)
    mechanism = (found.group("mechanism") if found and found.group("mechanism") else s.sasl_mechanism) or "?"
    offered = _OFFERED.search(text)
    offers = f" (it offers {offered.group('offered').strip()})" if offered else ""
    return ConnectionDiagnosis(s.cluster, ConnectionCause.MECHANISM_NOT_ENABLED, (
        f"{s.where}: SASL mechanism {mechanism} is not enabled on the broker{offers} — set "
        f"{s.variable('SASL_MECHANISM')} to a mechanism the listener enables"))


def _authentication_failed(s: ClientSettings, text: str) -> ConnectionDiagnosis:
    user = s.sasl_username or f"<unset: {s.variable('SASL_USERNAME')}>"
    return ConnectionDiagnosis(s.cluster, ConnectionCause.AUTHENTICATION_FAILED, (
        f"{s.where}: authentication failed for user {user} ({s.sasl_mechanism or 'no SASL mechanism set'}): "
        f"wrong password in {s.variable('SASL_PASSWORD')} or no such user — check the password and that the "
        f"user has {s.sasl_mechanism or 'SASL'} credentials on the cluster ({librdkafka_detail(text)})"))

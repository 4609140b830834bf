"""A secure single-node dev cluster: SASL_SSL with SCRAM-SHA-512 for clients, ACLs enforced.

The same broker as ``devstack/cluster.py`` (:class:`KafkaCluster`), given through its
:class:`ClusterSpec` (``overrides``, ``format_args``, ``client_config``):

* a ``SASL_SSL`` client listener (SCRAM-SHA-512, the broker's certificate from its own CA,
  ``devstack/certificates.py``), which is also the inter-broker listener, as ``admin``;
* the controller listener on mutual TLS (``SSL``, client certificate required): KRaft controllers
  cannot take SCRAM, and a plaintext controller port would let anyone in as a super user;
* ``StandardAuthorizer`` with no access where no ACL is found; super users: ``admin`` and the
  broker's own certificate subject (for the controller listener);
* SCRAM credentials for ``admin`` and ``sync`` written at storage format time.

Passwords and the keystore password are generated at the first start of a data folder and kept in
``<data>/secure-access.json`` (mode 0600), so a restart of the same folder finds them; nothing of it
is in the repository. The readiness probe is an authenticated metadata request as ``admin``.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.certificates import BrokerCertificates, broker_certificates
from devstack.cluster import ClusterSpec, KafkaCluster

SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
SYNC_USER = "sync"
ACCESS_FILE = "secure-access.json"


@dataclass(frozen=True)
class SecureAccess:
    """What a client needs to reach one secure cluster: its CA and the SCRAM passwords."""

    bootstrap_servers: str
    ca_pem: Path
    passwords: dict[str, str] = field(repr=False)  # user -> password

    def client_config(self, user: str) -> dict[str, Any]:
        """librdkafka settings of ``user`` (``admin`` or ``sync``) on this cluster."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": user,
            "sasl.password": self.passwords[user],
            "ssl.ca.location": str(self.ca_pem),
        }


def access_file(data_dir: Path) -> Path:
    """Where a secure cluster whose data folder is ``data_dir`` keeps its CA and passwords."""
    return data_dir / ACCESS_FILE


def login_config(access_path: Path, user: str = ADMIN_USER) -> dict[str, str]:
    """librdkafka settings (all but ``bootstrap.servers``) of ``user`` on the secure cluster whose
    access file is ``access_path``: how the stack's processes (mirror, traffic, consumers) log in
    without a password on their command line or in their environment."""
    access = json.loads(access_path.read_text())
    config = SecureAccess("", Path(access["ca_pem"]), access["passwords"]).client_config(user)
    del config["bootstrap.servers"]
    return config


def _jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def secure_broker_settings(port: int, controller_port: int, certs: BrokerCertificates,
                           admin_password: str) -> dict[str, str]:
    """The broker settings that replace the plain cluster's listeners (``ClusterSpec.overrides``)."""
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:SSL,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": _jaas(ADMIN_USER, admin_password),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs.keystore),
        "ssl.keystore.password": certs.keystore_password,
        "ssl.key.password": certs.keystore_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_pem),
        "listener.name.controller.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN_USER};{certs.broker_principal}",
    }


def _load_or_make_access(data_dir: Path, name: str) -> dict[str, Any]:
    path = access_file(data_dir)
    if path.exists():
        return json.loads(path.read_text())
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)  # server.properties holds the keystore password and admin's login
    certs = broker_certificates(data_dir / "tls", name)
    access = {
        "ca_pem": str(certs.ca_pem), "keystore": str(certs.keystore), "keystore_password": certs.keystore_password,
        "broker_dn": certs.broker_dn,
        "passwords": {user: secrets.token_urlsafe(24) for user in (ADMIN_USER, SYNC_USER)},
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(access, out)
    return access


def secure_cluster(name: str, port: int, controller_port: int, data_dir: Path,
                   jars_dir: Path) -> tuple[KafkaCluster, SecureAccess]:
    """A secure cluster (not started) and how to reach it; certificates and passwords are made on
    the first call for ``data_dir`` and reused after."""
    access = _load_or_make_access(data_dir, name)
    certs = BrokerCertificates(Path(access["ca_pem"]), Path(access["keystore"]), access["keystore_password"],
                               access["broker_dn"])
    passwords = access["passwords"]
    client = SecureAccess(f"127.0.0.1:{port}", certs.ca_pem, passwords)
    spec = ClusterSpec(
        name, port, controller_port, data_dir,
        overrides=secure_broker_settings(port, controller_port, certs, passwords[ADMIN_USER]),
        format_args=tuple(
            arg for user, password in passwords.items()
            for arg in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")
        ),
        client_config={k: v for k, v in client.client_config(ADMIN_USER).items() if k != "bootstrap.servers"},
    )
    return KafkaCluster(spec, jars_dir), client

"""TLS material for a secure dev cluster, made at start with the JDK's ``keytool`` (nothing checked in).

For one cluster, under its ``tls/`` folder (mode 0700):

* ``ca.p12`` — a CA of its own (key pair, self-signed, ``BasicConstraints: CA``);
* ``ca.pem`` — that CA's certificate, PEM: the clients' ``ssl.ca.location`` and the broker's
  truststore (``ssl.truststore.type=PEM``);
* ``broker.p12`` — the broker's key and its certificate signed by the CA, valid for ``127.0.0.1`` and
  ``localhost``, with the CA in its chain: the broker's keystore (PKCS12).

The keystore password is generated here and only kept in :class:`BrokerCertificates` (and, through
the broker settings, in the cluster's own data folder). A CA per cluster, so a client handed the
other cluster's CA fails the handshake, as it would in production.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from devstack.errors import BrokerStartError

KEYTOOL_TIMEOUT_S = 60.0
VALIDITY_DAYS = "30"  # dev certificates: a fresh set at every first start of a data folder
BROKER_NAMES = "SAN=ip:127.0.0.1,dns:localhost"
# keytool is a short JVM run: the client compiler and serial GC halve its start (measured 2.2 s -> 1.1 s).
QUICK_JVM = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")


@dataclass(frozen=True)
class BrokerCertificates:
    ca_pem: Path
    keystore: Path
    keystore_password: str = field(repr=False)
    broker_dn: str  # the broker's certificate subject: its principal on the mTLS controller listener

    @property
    def broker_principal(self) -> str:
        return f"User:{self.broker_dn}"


def _keytool(tls_dir: Path, *args: str) -> None:
    try:
        done = subprocess.run(["keytool", *QUICK_JVM, *args], check=False, cwd=tls_dir, capture_output=True, text=True,
                              timeout=KEYTOOL_TIMEOUT_S)
    except FileNotFoundError:
        raise BrokerStartError("'keytool' was not found on PATH: it comes with the JDK (Debian: "
                               "apt-get install -y openjdk-17-jdk-headless)") from None
    if done.returncode != 0:
        raise BrokerStartError(f"keytool {args[0]} failed in {tls_dir}:\n{done.stdout}{done.stderr}")


def broker_certificates(tls_dir: Path, cluster_name: str) -> BrokerCertificates:
    """Make a CA and a broker certificate for ``cluster_name`` in ``tls_dir`` (an empty or new folder)."""
    tls_dir.mkdir(parents=True, exist_ok=True)
    tls_dir.chmod(0o700)
    password = secrets.token_urlsafe(24)
    store = ("-storetype", "PKCS12", "-storepass", password, "-keypass", password)
    key = ("-keyalg", "EC", "-groupname", "secp256r1", "-validity", VALIDITY_DAYS)
    ca_dn = f"CN=offset-pipeline devstack CA {cluster_name}"
    broker_dn = f"CN=offset-pipeline-devstack-broker-{cluster_name}"
    _keytool(tls_dir, "-genkeypair", "-alias", "ca", "-dname", ca_dn, "-ext", "bc:c", *key,
             "-keystore", "ca.p12", *store)
    _keytool(tls_dir, "-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", password,
             "-file", "ca.pem")
    _keytool(tls_dir, "-genkeypair", "-alias", "broker", "-dname", broker_dn, "-ext", BROKER_NAMES, *key,
             "-keystore", "broker.p12", *store)
    _keytool(tls_dir, "-certreq", "-alias", "broker", "-keystore", "broker.p12", "-storepass", password,
             "-file", "broker.csr")
    _keytool(tls_dir, "-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", password,
             "-infile", "broker.csr", "-outfile", "broker.pem", "-validity", VALIDITY_DAYS, "-ext", BROKER_NAMES,
             "-ext", "ku:c=digitalSignature,keyEncipherment", "-ext", "eku=serverAuth,clientAuth")
    _keytool(tls_dir, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
             "-keystore", "broker.p12", "-storepass", password)
    _keytool(tls_dir, "-importcert", "-alias", "broker", "-file", "broker.pem",
             "-keystore", "broker.p12", "-storepass", password)
    for path in tls_dir.iterdir():
        path.chmod(0o600)
    return BrokerCertificates(tls_dir / "ca.pem", tls_dir / "broker.p12", password, broker_dn)

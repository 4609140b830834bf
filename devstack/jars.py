"""Fetch the pinned Kafka broker jars from Maven Central into a cached folder.

The versions live in ``pom.xml`` beside this file. The folder is filled once and reused: a marker
file records the hash of the POM it was filled from, so editing the POM re-fetches.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from devstack.errors import DevStackError

POM = Path(__file__).with_name("pom.xml")
_MARKER = ".pom-sha256"


def pom_digest(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def jars_ready(jars_dir: Path, pom: Path = POM) -> bool:
    marker = jars_dir / _MARKER
    return marker.exists() and marker.read_text().strip() == pom_digest(pom)


def fetch_jars(jars_dir: Path, pom: Path = POM) -> Path:
    """Fill ``jars_dir`` with ``pom``'s runtime classpath (default: the broker's); return it.
    No-op when cached."""
    if jars_ready(jars_dir, pom):
        return jars_dir
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevStackError(
            "Maven ('mvn') is not installed; it fetches the Kafka jars from Maven Central. "
            "Install it (Debian: apt-get install -y maven) or run bin/setup."
        )
    staging = jars_dir.with_name(jars_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise DevStackError(f"fetching the jars of {pom} with Maven failed:\n{tail}")
    (staging / _MARKER).write_text(pom_digest(pom))
    # Swap in whole so a broken fetch never leaves a half-filled classpath behind.
    shutil.rmtree(jars_dir, ignore_errors=True)
    staging.rename(jars_dir)
    return jars_dir

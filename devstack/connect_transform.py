"""The project's Kafka Connect transform (``connect-transform/``, Java): its jar, built with Maven
when missing or out of date.

``io.offsetpipeline.connect.OriginHeaders`` writes the origin headers (``IDC``, ``Offset``) on every
record MirrorMaker 2 copies; :mod:`devstack.mirrormaker2` puts the jar on MirrorMaker 2's classpath.
Like the Kafka jars (:mod:`devstack.jars`), the build is skipped when a marker beside the jar
records the digest of the sources it was built from: editing the POM or a source rebuilds.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from devstack.errors import DevStackError
from devstack.paths import REPO_ROOT

MODULE_DIR = REPO_ROOT / "connect-transform"
JAR = MODULE_DIR / "target" / "offset-pipeline-connect-transform.jar"
TRANSFORM_CLASS = "io.offsetpipeline.connect.OriginHeaders"
_MARKER = JAR.with_name(".sources-sha256")


def sources_digest(module_dir: Path = MODULE_DIR) -> str:
    """The digest of the POM and every file under ``src/main`` (paths and contents): what the jar
    is built from. Tests are not in the jar, so editing them does not rebuild it."""
    digest = hashlib.sha256()
    files = [module_dir / "pom.xml", *sorted(p for p in (module_dir / "src" / "main").rglob("*") if p.is_file())]
    for path in files:
        digest.update(str(path.relative_to(module_dir)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def transform_jar_ready() -> bool:
    return JAR.exists() and _MARKER.exists() and _MARKER.read_text().strip() == sources_digest()


def transform_jar() -> Path:
    """The transform's jar, built first (``mvn package``, tests skipped: ``bin/test`` runs them)
    unless the jar on disk was built from the current sources."""
    if transform_jar_ready():
        return JAR
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevStackError("Maven ('mvn') is not installed; it builds connect-transform/. Run bin/setup.")
    digest = sources_digest()
    cmd = [mvn, "-q", "-B", "-f", str(MODULE_DIR / "pom.xml"), "package", "-DskipTests"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 or not JAR.exists():
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise DevStackError(f"building {JAR.relative_to(REPO_ROOT)} with Maven failed:\n{tail}")
    _MARKER.write_text(digest)
    return JAR

"""The Connect transform's jar as the dev harness builds and finds it (devstack/connect_transform.py).
The transform's behaviour is tested in Java (connect-transform/src/test, run by bin/test) and, on
real brokers inside MirrorMaker 2, in test_mirrormaker2.py."""

from __future__ import annotations

import shutil
import zipfile

from devstack.connect_transform import JAR, MODULE_DIR, TRANSFORM_CLASS, sources_digest, transform_jar, transform_jar_ready


def test_the_jar_holds_the_transform_and_its_plugin_manifest():
    jar = transform_jar()
    assert jar == JAR and transform_jar_ready()
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        assert TRANSFORM_CLASS.replace(".", "/") + ".class" in names
        services = archive.read("META-INF/services/org.apache.kafka.connect.transforms.Transformation").decode()
    assert services.split() == [TRANSFORM_CLASS]


def test_the_digest_follows_the_pom_and_main_sources_not_the_tests(tmp_path):
    copy = tmp_path / "module"
    shutil.copytree(MODULE_DIR, copy, ignore=shutil.ignore_patterns("target"))
    before = sources_digest(copy)
    assert sources_digest(copy) == before
    (copy / "src" / "test" / "Extra.java").write_text("class Extra {}")
    assert sources_digest(copy) == before
    source = next((copy / "src" / "main").rglob("OriginHeaders.java"))
    source.write_text(source.read_text() + "\n")
    after_source = sources_digest(copy)
    assert after_source != before
    (copy / "pom.xml").write_text((copy / "pom.xml").read_text() + "\n")
    assert sources_digest(copy) not in (before, after_source)

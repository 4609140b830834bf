"""The dev harness's MirrorMaker 2 configuration: with the transform both ways, plain one way, and
logged in to secure clusters (librdkafka's login mapped to per-cluster settings, the password in a
0600 file only)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from devstack.errors import DevStackError
from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import (
    MirrorMaker2,
    MirrorMaker2Config,
    mm2_login_properties,
    mm2_properties,
    mm2_secret_properties,
)

CLUSTERS = (MirrorEndpoint("us-east", "127.0.0.1:1"), MirrorEndpoint("dc-a", "127.0.0.1:2"))


def test_with_the_transform_both_flows_drop_copies_then_mark_the_origin():
    props = mm2_properties(MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083))
    for flow in ("us-east->dc-a", "dc-a->us-east"):
        assert props[f"{flow}.enabled"] == "true"
        # one stage does both: drops what carries IDC (a copy), marks the rest
        assert props[f"{flow}.transforms"] == "origin"
        assert props[f"{flow}.transforms.origin.type"] == "io.offsetpipeline.connect.OriginHeaders"
        assert props[f"{flow}.transforms.origin.drop.copies"] == "true"
        assert props[f"{flow}.transforms.origin.cluster.header"] == "IDC"
        assert not [key for key in props if key.startswith(f"{flow}.predicates")]
    assert props["emit.offset-syncs.enabled"] == "false"


@pytest.mark.parametrize("config", [
    MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083),
    MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, origin_headers=False, one_way=True),
], ids=["with the transform", "plain"])
def test_only_the_named_topics_are_copied_never_every_heartbeats_topic(config):
    """MirrorMaker 2 copies every heartbeats topic it finds unless told not to: beside another
    MirrorMaker 2 on the same clusters, the two copied each other's copies under ever longer names."""
    props = mm2_properties(config)
    assert props["heartbeats.replication.enabled"] == "false"
    assert props["emit.heartbeats.enabled"] == "false"


def test_without_the_transform_one_flow_runs_otherwise_configured_the_same():
    config = MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, origin_headers=False, one_way=True)
    props = mm2_properties(config)
    assert config.flows == (("us-east", "dc-a"),)
    assert (props["us-east->dc-a.enabled"], props["dc-a->us-east.enabled"]) == ("true", "false")
    assert not [key for key in props if "transforms" in key or "predicates" in key]
    with_transform = mm2_properties(MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, one_way=True))
    assert {k: v for k, v in with_transform.items() if "transforms" not in k and "predicates" not in k} == props


def test_both_modes_read_the_workers_offsets_committed_only():
    """Exactly-once makes Connect read its offsets topic read_committed; at-least-once is told to, so
    one that takes over an exactly-once MirrorMaker 2's flows never resumes from an aborted
    transaction's offsets (past copies that were never committed)."""
    eos = mm2_properties(MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083))
    alo = mm2_properties(MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), exactly_once=False))
    for cluster in ("us-east", "dc-a"):
        assert eos[f"{cluster}.exactly.once.source.support"] == "enabled"
        assert f"{cluster}.isolation.level" not in eos  # Connect sets it itself with exactly-once
        assert f"{cluster}.exactly.once.source.support" not in alo
        assert alo[f"{cluster}.isolation.level"] == "read_committed"
        # the copies' source consumers read committed records only, in both modes
        assert eos[f"{cluster}.consumer.isolation.level"] == alo[f"{cluster}.consumer.isolation.level"] == "read_committed"


def test_the_source_fetches_batch_only_when_a_wait_is_set(monkeypatch):
    config = MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083)
    monkeypatch.delenv("OFFSET_PIPELINE_MM2_FETCH_WAIT_MS", raising=False)
    assert not [key for key in mm2_properties(config) if "fetch" in key]  # copy at once, as the benchmarks need
    monkeypatch.setenv("OFFSET_PIPELINE_MM2_FETCH_WAIT_MS", "500")
    props = mm2_properties(config)
    for cluster in ("us-east", "dc-a"):
        assert props[f"{cluster}.consumer.fetch.max.wait.ms"] == "500"
        assert props[f"{cluster}.consumer.fetch.min.bytes"] == str(1 << 20)
    for bad in ("half a second", "-5", "60001"):
        monkeypatch.setenv("OFFSET_PIPELINE_MM2_FETCH_WAIT_MS", bad)
        with pytest.raises(DevStackError, match="OFFSET_PIPELINE_MM2_FETCH_WAIT_MS must be"):
            mm2_properties(config)


def test_plain_mirrormaker_both_ways_is_refused():
    with pytest.raises(DevStackError, match="one way only"):
        MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, origin_headers=False)


# -- logging in to secure clusters ------------------------------------------------------------------

PASSWORD = "s3cret-Pass_word"
SCRAM_512 = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
             "sasl.password": PASSWORD, "ssl.ca.location": "/data/idc1/tls/ca.pem"}
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def secure(name: str, **changes) -> MirrorEndpoint:
    config = {**SCRAM_512, **changes}
    return MirrorEndpoint(name, "127.0.0.1:1", client_config={k: v for k, v in config.items() if v is not None})


@pytest.mark.parametrize("client_config, expected", [
    (SCRAM_512, {
        "idc1.security.protocol": "SASL_SSL",
        "idc1.sasl.mechanism": "SCRAM-SHA-512",
        "idc1.sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="{PASSWORD}";',
        "idc1.ssl.truststore.type": "PEM",
        "idc1.ssl.truststore.location": "/data/idc1/tls/ca.pem",
    }),
    ({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "scram-sha-256", "sasl.username": "sync",
      "sasl.password": 'a"b\\c'}, {
        "idc1.security.protocol": "SASL_PLAINTEXT",
        "idc1.sasl.mechanism": "SCRAM-SHA-256",
        # JAAS reads a backslash inside quotes as an escape: quotes and backslashes are escaped
        "idc1.sasl.jaas.config": f'{SCRAM_MODULE} required username="sync" password="a\\"b\\\\c";',
    }),
    ({"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"}, {
        "idc1.security.protocol": "SSL", "idc1.ssl.truststore.type": "PEM", "idc1.ssl.truststore.location": "/ca.pem",
    }),
    ({"security.protocol": "SSL"}, {"idc1.security.protocol": "SSL"}),
    ({}, {}),
])
def test_a_librdkafka_login_maps_to_exactly_these_cluster_settings(client_config, expected):
    assert mm2_login_properties(MirrorEndpoint("idc1", "127.0.0.1:1", client_config=client_config)) == expected


def test_each_cluster_logs_in_under_its_own_alias_and_the_password_is_in_the_secrets_file_only():
    other_password = "other-" + PASSWORD
    config = MirrorMaker2Config(
        (secure("idc1"), secure("idc2", **{"sasl.password": other_password, "ssl.ca.location": "/data/idc2/ca.pem"})),
        Path("/tmp/mm2"), rest_port=8083)
    props = mm2_properties(config)
    assert mm2_secret_properties(config) == {
        "idc1.sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="{PASSWORD}";',
        "idc2.sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="{other_password}";',
    }
    # the configuration refers to the secrets file: MirrorMaker 2 copies it into its Connect config topics
    assert config.secrets_path == Path("/tmp/mm2/mm2-secrets.properties")
    assert (props["idc1.sasl.jaas.config"], props["idc2.sasl.jaas.config"]) == (
        "${file:/tmp/mm2/mm2-secrets.properties:idc1.sasl.jaas.config}",
        "${file:/tmp/mm2/mm2-secrets.properties:idc2.sasl.jaas.config}")
    assert (props["config.providers"], props["config.providers.file.class"]) == (
        "file", "org.apache.kafka.common.config.provider.FileConfigProvider")
    assert not [key for key, value in props.items() if PASSWORD in value]
    assert (props["idc1.ssl.truststore.location"], props["idc2.ssl.truststore.location"]) == (
        "/data/idc1/tls/ca.pem", "/data/idc2/ca.pem")
    # nothing unprefixed: each cluster's login reaches only that cluster's clients
    login_keys = ("security.protocol", "sasl.", "ssl.")
    assert not [key for key in props if key.startswith(login_keys)]
    plain_config = MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083)
    plain = mm2_properties(plain_config)
    assert not [key for key in plain if key.partition(".")[2].startswith(login_keys) or key.startswith("config.providers")]
    assert mm2_secret_properties(plain_config) == {}


def test_a_work_dir_that_would_split_the_secrets_reference_is_refused():
    with pytest.raises(DevStackError, match="may hold no ':'"):
        MirrorMaker2Config((secure("idc1"), CLUSTERS[1]), Path("/tmp/mm2:a"), rest_port=8083)
    MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2:a"), rest_port=8083)  # no secret, no reference


@pytest.mark.parametrize("changes, message", [
    ({"ssl.certificate.location": "/client.pem"}, "cannot map the librdkafka setting.s. ssl.certificate.location"),
    ({"sasl.oauthbearer.config": PASSWORD, "enable.ssl.certificate.verification": "false"},
     "enable.ssl.certificate.verification, sasl.oauthbearer.config"),
    ({"sasl.mechanism": "PLAIN"}, "SCRAM-SHA-256 or SCRAM-SHA-512 only .sasl.mechanism is PLAIN"),
    ({"sasl.mechanism": None}, "sasl.mechanism is not set"),
    ({"sasl.mechanisms": "SCRAM-SHA-256"}, "differ"),
    ({"sasl.password": None}, "needs sasl.password"),
    ({"sasl.username": "", "sasl.password": ""}, "needs sasl.username and sasl.password"),
    ({"sasl.password": PASSWORD + "\n"}, "control character"),
    ({"security.protocol": "PLAINTEXT", "ssl.ca.location": None}, "sasl.mechanism, sasl.password, sasl.username given with"),
    ({"security.protocol": "SSL"}, "does not use SASL"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "ssl.ca.location given with security.protocol SASL_PLAINTEXT"),
    ({"security.protocol": "KERBEROS"}, "security.protocol must be one of"),
])
def test_a_login_it_cannot_map_is_refused_naming_the_key_never_the_password(changes, message):
    with pytest.raises(DevStackError, match=message) as refused:
        MirrorMaker2Config((CLUSTERS[0], secure("idc2", **changes)), Path("/tmp/mm2"), rest_port=8083)
    assert str(refused.value).startswith("idc2: ")
    assert PASSWORD not in str(refused.value) and PASSWORD not in repr(refused.value)


def test_a_ca_directory_is_refused(tmp_path):
    with pytest.raises(DevStackError, match="is a directory; MirrorMaker 2 takes one PEM file"):
        mm2_login_properties(secure("idc1", **{"ssl.ca.location": str(tmp_path)}))


def test_the_properties_file_is_private_and_the_password_is_on_no_command_line_nor_in_a_repr(tmp_path, monkeypatch):
    import devstack.mirrormaker2 as module

    # the classpath is not what is checked here: no jar is fetched or built for this test
    monkeypatch.setattr(module, "mm2_jars", lambda: tmp_path / "mm2-jars")
    monkeypatch.setattr(module, "transform_jar", lambda: tmp_path / "transform.jar")
    config = MirrorMaker2Config((secure("idc1"), secure("idc2")), tmp_path / "mm2", rest_port=8083)
    mirror = MirrorMaker2(config)
    config.work_dir.mkdir()
    config.properties_path.write_text("left by an older run\n")
    config.properties_path.chmod(0o644)
    mirror.write_config()
    assert stat.S_IMODE(config.properties_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.secrets_path.stat().st_mode) == 0o600
    assert config.secrets_path.read_text().splitlines() == [
        f'{name}.sasl.jaas.config = {SCRAM_MODULE} required username="admin" password="{PASSWORD}";'
        for name in ("idc1", "idc2")]
    lines = config.properties_path.read_text().splitlines()
    assert f"idc2.sasl.jaas.config = ${{file:{config.secrets_path}:idc2.sasl.jaas.config}}" in lines
    assert "idc2.ssl.truststore.type = PEM" in lines
    assert PASSWORD not in config.properties_path.read_text()
    assert [path.name for path in config.work_dir.iterdir() if path.name.endswith(".part")] == []
    assert not [arg for arg in mirror.command() if PASSWORD in arg]
    assert str(config.properties_path) in mirror.command()
    for text in (repr(config), str(config), repr(config.clusters), repr(mirror.__dict__)):
        assert PASSWORD not in text


def test_the_command_line_takes_logins_as_access_files_of_its_clusters(tmp_path, capsys):
    from devstack.mirrormaker2 import main

    args = ["--cluster", "idc1=127.0.0.1:1", "--cluster", "idc2=127.0.0.1:2", "--work-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as stranger:
        main([*args, "--login", f"idc3={tmp_path / 'secure-access.json'}"])
    assert stranger.value.code == 2 and "--login names no --cluster: idc3" in capsys.readouterr().err
    assert main([*args, "--login", f"idc1={tmp_path / 'missing.json'}"]) == 2
    assert "FileNotFoundError" in capsys.readouterr().err

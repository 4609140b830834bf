"""The two cluster names are configuration (``OFFSET_PIPELINE_CLUSTERS``): parsed and checked at load
time, every per-cluster variable under the name's prefix, every setting that names a cluster checked
against them, the Dagster resources in fixed slots carrying the names, and the command line offering
them. The names are what the mirror writes in the ``IDC`` header: any other is a third cluster's."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.cli import main as cli_main
from offset_pipeline.definitions import build_resources
from offset_pipeline.resources import CLUSTER_RESOURCE_KEYS
from offset_pipeline.settings import (
    CLUSTER_NAME_PATTERN,
    DEFAULT_CLUSTER_NAMES,
    SettingsError,
    cluster_env_prefix,
    cluster_names,
    cluster_variables,
    mirror_position_groups,
    read_settings,
    topic_shapes,
)
from offset_pipeline.translation.headers import (
    CopiedFrom,
    HeaderProblem,
    MalformedHeader,
    origin_headers,
    parse_origin,
    parse_origin_general,
)
from offset_pipeline.translation.result import TranslationStatus
from tests.helpers.settings_checks import lookup, validate_definitions

NAMED = {"OFFSET_PIPELINE_CLUSTERS": "us-east,dc-a", "OFFSET_PIPELINE_US_EAST_BOOTSTRAP": "kafka-use:9092",
         "OFFSET_PIPELINE_DC_A_BOOTSTRAP": "kafka-dca:9092"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ("idc1", "idc2")),
        ("", ("idc1", "idc2")),
        ("  ", ("idc1", "idc2")),
        ("us-east,dc-a", ("us-east", "dc-a")),
        (" us-east , dc-a ", ("us-east", "dc-a")),
        ("dc-a,us-east", ("dc-a", "us-east")),  # the order is kept: it is the resource slots' order
        ("prod-fra,prod_ams", ("prod-fra", "prod_ams")),
        ("idc2,idc1", ("idc2", "idc1")),
        ("A1,a2", ("A1", "a2")),
        ("x" * 64 + ",y", ("x" * 64, "y")),
    ],
)
def test_cluster_names_from_the_environment(value, expected):
    env = {} if value is None else {"OFFSET_PIPELINE_CLUSTERS": value}
    assert cluster_names(env) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("us-east", "exactly two cluster names"),
        ("us-east,dc-a,prod-fra", "exactly two cluster names"),
        ("us-east,", "a cluster name is empty"),
        (",dc-a", "a cluster name is empty"),
        (" , ", "a cluster name is empty"),
        ("us-east,us-east", "must differ"),
        ("us-east,us_east", "OFFSET_PIPELINE_US_EAST_BOOTSTRAP"),  # one prefix for both
        ("US-EAST,us-east", "OFFSET_PIPELINE_US_EAST_"),
        ("a,a-controller", "OFFSET_PIPELINE_A_CONTROLLER_PORT"),  # a's CONTROLLER_PORT is a-controller's PORT
        ("us.east,dc-a", "'us.east' is not a cluster name"),  # MirrorMaker 2's separator
        ("us east,dc-a", "'us east' is not a cluster name"),
        ("-a,dc-a", "'-a' is not a cluster name"),  # would read as an option of --to
        ("_a,dc-a", "'_a' is not a cluster name"),
        ("zürich,dc-a", "'zürich' is not a cluster name"),
        ("us-east;dc-a", "exactly two cluster names"),
        ("x" * 65 + ",y", "longer than 64"),
    ],
)
def test_a_bad_cluster_names_value_fails_naming_the_variable(value, message):
    with pytest.raises(SettingsError, match="OFFSET_PIPELINE_CLUSTERS") as caught:
        cluster_names({"OFFSET_PIPELINE_CLUSTERS": value})
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)  # what callers of the settings already catch


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("idc1", "OFFSET_PIPELINE_IDC1_"), ("idc2", "OFFSET_PIPELINE_IDC2_"), ("us-east", "OFFSET_PIPELINE_US_EAST_"),
     ("dc-a", "OFFSET_PIPELINE_DC_A_"), ("prod_fra", "OFFSET_PIPELINE_PROD_FRA_"), ("Dc-B2", "OFFSET_PIPELINE_DC_B2_")],
)
def test_each_cluster_has_its_variables_under_its_prefix(name, prefix):
    assert cluster_env_prefix(name) == prefix
    assert cluster_variables(name)[0] == prefix + "BOOTSTRAP"


_name = st.from_regex(CLUSTER_NAME_PATTERN, fullmatch=True).filter(lambda n: len(n) <= 64)
_any_text = st.text(alphabet=st.sampled_from("aZ09-_. ,é"), max_size=12)


@given(st.one_of(_name, _any_text), st.one_of(_name, _any_text))
def test_accepted_names_are_two_valid_names_whose_variables_never_meet(first, second):
    """Every pair either fails named or comes back as given, each a valid name, their variables
    disjoint (a variable set for one cluster can never configure the other)."""
    try:
        names = cluster_names({"OFFSET_PIPELINE_CLUSTERS": f"{first},{second}"})
    except SettingsError as exc:
        assert "OFFSET_PIPELINE_CLUSTERS" in str(exc)
        return
    assert names == (first.strip(), second.strip())
    assert all(CLUSTER_NAME_PATTERN.fullmatch(n) for n in names)
    assert not set(cluster_variables(names[0])) & set(cluster_variables(names[1]))


# Table: environment -> (path into the settings, expected value), under configured names.
NAMED_SETTINGS_CASES = [
    (NAMED, "kafka.us-east.bootstrap_servers", "kafka-use:9092"),
    (NAMED, "kafka.dc-a.bootstrap_servers", "kafka-dca:9092"),
    (NAMED, "kafka.us-east.cluster_name", "us-east"),
    (NAMED, "kafka.dc-a.security_protocol", "PLAINTEXT"),
    ({**NAMED, "OFFSET_PIPELINE_DC_A_SECURITY_PROTOCOL": "SASL_SSL"}, "kafka.dc-a.security_protocol", "SASL_SSL"),
    ({**NAMED, "OFFSET_PIPELINE_US_EAST_SASL_USERNAME": "sync"}, "kafka.us-east.sasl_username", "sync"),
    ({**NAMED, "OFFSET_PIPELINE_US_EAST_SASL_PASSWORD": "pw"}, "kafka.us-east.sasl_password_env",
     "OFFSET_PIPELINE_US_EAST_SASL_PASSWORD"),
    ({**NAMED, "OFFSET_PIPELINE_US_EAST_SASL_PASSWORD": "pw"}, "kafka.dc-a.sasl_password_env", None),
    ({**NAMED, "OFFSET_PIPELINE_DC_A_SSL_CA_LOCATION": "/ca.pem"}, "kafka.dc-a.ssl_ca_location", "/ca.pem"),
    # the old names' variables configure only clusters of those names
    ({**NAMED, "OFFSET_PIPELINE_IDC1_BOOTSTRAP": "old:9092"}, "kafka.us-east.bootstrap_servers", "kafka-use:9092"),
    ({**NAMED, "OFFSET_PIPELINE_IDC1_SASL_USERNAME": "old"}, "kafka.us-east.sasl_username", None),
    # the default names keep today's variables and the local stack's addresses
    ({"OFFSET_PIPELINE_IDC1_BOOTSTRAP": "b1:9092"}, "kafka.idc1.bootstrap_servers", "b1:9092"),
    ({"OFFSET_PIPELINE_CLUSTERS": "idc1,idc2"}, "kafka.idc2.bootstrap_servers", "127.0.0.1:29092"),
    ({"OFFSET_PIPELINE_CLUSTERS": "idc2,idc1", "OFFSET_PIPELINE_IDC2_PORT": "42092"}, "kafka.idc2.bootstrap_servers",
     "127.0.0.1:42092"),
]


@pytest.mark.parametrize(("env", "path", "expected"), NAMED_SETTINGS_CASES)
def test_read_settings_under_configured_names(env, path, expected):
    assert lookup(read_settings(env), path) == expected


def test_the_clusters_come_in_the_configured_order():
    assert list(read_settings(NAMED).kafka) == ["us-east", "dc-a"]
    assert list(read_settings({**NAMED, "OFFSET_PIPELINE_CLUSTERS": "dc-a,us-east"}).kafka) == ["dc-a", "us-east"]
    assert list(read_settings({}).kafka) == list(DEFAULT_CLUSTER_NAMES)


@pytest.mark.parametrize("missing", ["OFFSET_PIPELINE_US_EAST_BOOTSTRAP", "OFFSET_PIPELINE_DC_A_BOOTSTRAP"])
def test_a_configured_name_without_a_bootstrap_fails_naming_its_variable(missing):
    env = {k: v for k, v in NAMED.items() if k != missing}
    with pytest.raises(SettingsError, match=f"{missing} is not set"):
        read_settings(env)


def test_resources_sit_in_fixed_slots_and_carry_the_configured_names():
    resources = build_resources(read_settings({**NAMED, "OFFSET_PIPELINE_US_EAST_SASL_PASSWORD": "s3cret"}))
    first, second = (resources[key] for key in CLUSTER_RESOURCE_KEYS)
    assert (first.cluster_name, first.bootstrap_servers) == ("us-east", "kafka-use:9092")
    assert (second.cluster_name, second.bootstrap_servers) == ("dc-a", "kafka-dca:9092")
    assert first.sasl_password.env_var_name == "OFFSET_PIPELINE_US_EAST_SASL_PASSWORD"
    assert "s3cret" not in repr(resources)
    groups = {(g.source, g.target, g.stored_on, g.group_id) for g in resources["mirrors"].position_groups}
    assert groups == {("us-east", "dc-a", "dc-a", "offset-pipeline-mirror.us-east-to-dc-a"),
                      ("dc-a", "us-east", "us-east", "offset-pipeline-mirror.dc-a-to-us-east")}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("us-east->dc-a=dc-a:mm2", [{"source": "us-east", "target": "dc-a", "stored_on": "dc-a", "group_id": "mm2"}]),
        (" dc-a -> us-east = dc-a :g:1", [{"source": "dc-a", "target": "us-east", "stored_on": "dc-a", "group_id": "g:1"}]),
        ("us-east->dc-a=dc-a:group:connect-offsets:x",  # the explicit form names any group id
         [{"source": "us-east", "target": "dc-a", "stored_on": "dc-a", "group_id": "connect-offsets:x"}]),
        ("us-east->dc-a=dc-a:group:g", [{"source": "us-east", "target": "dc-a", "stored_on": "dc-a", "group_id": "g"}]),
        ("us-east->dc-a=dc-a:connect-offsets:mm2-offsets.us-east.internal, dc-a->us-east=us-east:connect-offsets: o_1-x ",
         [{"source": "us-east", "target": "dc-a", "stored_on": "dc-a", "offsets_topic": "mm2-offsets.us-east.internal"},
          {"source": "dc-a", "target": "us-east", "stored_on": "us-east", "offsets_topic": "o_1-x"}]),
    ],
)
def test_mirror_positions_under_configured_names(value, expected):
    assert mirror_position_groups({**NAMED, "OFFSET_PIPELINE_MIRROR_POSITIONS": value}) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("idc1->dc-a=dc-a:g", "'idc1' is not a configured cluster"),
        ("us-east->idc2=idc2:g", "'idc2' is not a configured cluster"),
        ("us-east->dc-a=fra:g", "'fra' is not a configured cluster"),
        ("us-east->us-east=dc-a:g", "not to 'us-east' itself"),
        ("us-east->dc-a=dc-a:connect-offsets:", "'' is not a Kafka topic name"),
        ("us-east->dc-a=dc-a:connect-offsets:a:b", "'a:b' is not a Kafka topic name"),
        ("us-east->dc-a=dc-a:connect-offsets:..", "'..' is not a Kafka topic name"),
        ("us-east->dc-a=dc-a:connect-offsets:" + "x" * 250, "is not a Kafka topic name"),
        ("us-east->dc-a=dc-a:group:", "the group id is empty"),
        ("us-east->dc-a=dc-a", "expected SOURCE->TARGET=CLUSTER:GROUP_ID or SOURCE->TARGET=CLUSTER:connect-offsets:TOPIC"),
        ("us-east->dc-a=dc-a:g,us-east->dc-a=dc-a:connect-offsets:t", "us-east->dc-a is given twice"),
    ],
)
def test_mirror_positions_naming_no_configured_cluster_fail_named(value, message):
    with pytest.raises(SettingsError, match="OFFSET_PIPELINE_MIRROR_POSITIONS entry") as caught:
        mirror_position_groups({**NAMED, "OFFSET_PIPELINE_MIRROR_POSITIONS": value})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("env", "value", "ok"),
    [
        (NAMED, "orders=one_way:us-east,b=two_way", True),
        (NAMED, "orders=one_way:dc-a", True),
        (NAMED, "orders=one_way:idc1", False),  # the default name is not a cluster any more
        (NAMED, "orders=one_way:US-EAST", False),  # names are matched exactly, as the IDC header is
        ({}, "orders=one_way:idc2", True),
        ({}, "orders=one_way:us-east", False),
    ],
)
def test_one_way_shapes_name_a_configured_cluster(env, value, ok):
    env = {**env, "OFFSET_PIPELINE_TOPIC_SHAPES": value}
    if ok:
        assert topic_shapes(env)["orders"] == value.split(",")[0].split("=")[1]
    else:
        with pytest.raises(SettingsError, match="OFFSET_PIPELINE_TOPIC_SHAPES entry 'orders=one_way:.*is not a configured"):
            topic_shapes(env)


# The IDC header against the configured names: the mirror writes them verbatim, so only the exact
# peer name is an origin; the old default names, another spelling or a third site are a third cluster.
@pytest.mark.parametrize(
    ("idc", "outcome"),
    [
        (b"us-east", CopiedFrom("us-east", 7)),
        (b"idc1", HeaderProblem.THIRD_CLUSTER),
        (b"idc2", HeaderProblem.THIRD_CLUSTER),
        (b"US-EAST", HeaderProblem.THIRD_CLUSTER),
        (b"us_east", HeaderProblem.THIRD_CLUSTER),
        (b"us-east ", HeaderProblem.THIRD_CLUSTER),
        (b"prod-fra", HeaderProblem.THIRD_CLUSTER),
        (b"dc-a", HeaderProblem.SELF_ORIGIN),
    ],
)
def test_an_idc_header_naming_neither_configured_cluster_is_a_third_cluster(idc, outcome):
    headers = [("IDC", idc), ("Offset", b"7")]
    for parse in (parse_origin, parse_origin_general):  # the shortcut and the general parse agree
        origin = parse(headers, read_from="dc-a", peer="us-east")
        if isinstance(outcome, CopiedFrom):
            assert origin == outcome
        else:
            assert isinstance(origin, MalformedHeader) and origin.problem is outcome
            assert origin.claimed_cluster == idc.decode()
    if outcome is HeaderProblem.THIRD_CLUSTER:
        assert origin.status is TranslationStatus.THIRD_CLUSTER_HEADER


@given(_name, _name, st.integers(0, 2**63 - 1))
def test_what_the_mirror_writes_under_any_configured_names_is_read_back_as_a_copy(source, target, offset):
    if source == target:
        return
    assert parse_origin(list(origin_headers(source, offset)), read_from=target, peer=source) == CopiedFrom(source, offset)


def test_switchover_offers_the_configured_names(monkeypatch, capsys):
    for key, value in NAMED.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as done:
        cli_main(["switchover", "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    assert "us-east or dc-a" in help_text and "idc" not in help_text
    with pytest.raises(SystemExit) as done:
        cli_main(["switchover", "--group", "g", "--to", "idc2"])
    assert done.value.code == 2
    assert "invalid choice: 'idc2' (choose from 'us-east', 'dc-a')" in capsys.readouterr().err


def test_switchover_offers_the_default_names_when_none_are_configured(monkeypatch, capsys):
    monkeypatch.delenv("OFFSET_PIPELINE_CLUSTERS", raising=False)
    with pytest.raises(SystemExit):
        cli_main(["switchover", "--help"])
    assert "idc1 or idc2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OFFSET_PIPELINE_CLUSTERS": "us-east"}, "OFFSET_PIPELINE_CLUSTERS='us-east': expected exactly two"),
        ({"OFFSET_PIPELINE_CLUSTERS": "us-east,dc-a"}, "OFFSET_PIPELINE_US_EAST_BOOTSTRAP is not set"),
    ],
)
def test_the_commands_say_what_is_wrong_with_the_names_without_a_traceback(monkeypatch, capsys, env, message):
    for key in [k for k in os.environ if k.startswith("OFFSET_PIPELINE_") and "BOOTSTRAP" in k]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as done:
        cli_main(["connections"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_code_location_loads_under_configured_names_and_refuses_bad_ones(tmp_path):
    done = validate_definitions({**NAMED, "OFFSET_PIPELINE_TOPIC_SHAPES": "orders=one_way:us-east"}, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    bad = validate_definitions({**NAMED, "OFFSET_PIPELINE_CLUSTERS": "us-east,us_east"}, tmp_path)
    assert bad.returncode != 0
    assert "OFFSET_PIPELINE_CLUSTERS='us-east,us_east'" in bad.stdout + bad.stderr
    stale_shape = validate_definitions({**NAMED, "OFFSET_PIPELINE_TOPIC_SHAPES": "orders=one_way:idc1"}, tmp_path)
    assert stale_shape.returncode != 0
    assert "'idc1' is not a configured cluster" in stale_shape.stdout + stale_shape.stderr


def test_no_dashboard_names_a_cluster_literally():
    """Grafana filters by the ``cluster`` variable, whose values are the data's (the active clusters
    that have rows): no panel, variable or file spells a cluster name, so any configured names work."""
    from offset_pipeline.storage import dashboards

    texts = [panel.sql + panel.title + panel.description for _, panels in dashboards.DASHBOARDS.values()
             for panel in panels]
    texts += [sql for _, _, sql in dashboards.VARIABLES]
    texts += [path.read_text() for path in dashboards.DASHBOARD_DIR.glob("*.json")]
    assert len(texts) > 3
    for text in texts:
        assert not any(name in text.lower() for name in DEFAULT_CLUSTER_NAMES), text[:200]
    (cluster_sql,) = [sql for name, _, sql in dashboards.VARIABLES if name == "cluster"]
    assert cluster_sql.startswith("SELECT DISTINCT active FROM ")


def test_an_offsets_topic_reaches_the_mirrors_resource():
    env = {**NAMED, "OFFSET_PIPELINE_MIRROR_POSITIONS":
           "us-east->dc-a=dc-a:connect-offsets:mm2-offsets.us-east.internal,dc-a->us-east=us-east:g"}
    groups = build_resources(read_settings(env))["mirrors"].position_groups
    assert [(g.source, g.target, g.stored_on, g.group_id, g.offsets_topic) for g in groups] == [
        ("us-east", "dc-a", "dc-a", None, "mm2-offsets.us-east.internal"), ("dc-a", "us-east", "us-east", "g", None)]

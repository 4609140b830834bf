"""Environment -> connection settings for the code location.

Reading the environment is kept apart from building Dagster resources so tests can pass a plain
dict. Secrets are never read here: only the *name* of the variable holding a password is kept,
and ``definitions.py`` turns it into ``dg.EnvVar`` so Dagster resolves it at run time and never
stores or displays the value.

The two clusters are named by ``OFFSET_PIPELINE_CLUSTERS`` (default ``idc1,idc2``, the local
stack's names): see :func:`cluster_names`. Every per-cluster variable is found under the name's
prefix (:func:`cluster_env_prefix`: ``us-east`` -> ``OFFSET_PIPELINE_US_EAST_BOOTSTRAP``), and every
setting that names a cluster (topic shapes, mirror positions) is checked against the two names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from offset_pipeline.translation.shape import TopicShape


class SettingsError(ValueError):
    """A variable's value is malformed; the message names the variable and the value."""


#: The cluster names when ``OFFSET_PIPELINE_CLUSTERS`` is unset: the local stack's (bin/up), which
#: keeps them whatever is configured.
DEFAULT_CLUSTER_NAMES = ("idc1", "idc2")
CLUSTERS_VARIABLE = "OFFSET_PIPELINE_CLUSTERS"
#: A name the mirror can write as the origin and MirrorMaker 2 accepts as a cluster alias: letters,
#: digits, ``-`` and ``_``, starting with a letter or digit. No ``.``: MirrorMaker 2's settings are
#: ``<alias>.<property>`` and its remote topics ``<alias>.<topic>``, so a dot makes both ambiguous.
#: No spaces or other signs: the name is also an environment variable's prefix, a Grafana variable
#: value and a command-line argument (``--to``; a leading ``-`` would read as an option).
CLUSTER_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: Long enough for any data-center name; the name prefixes remote topics (Kafka allows 249 characters).
MAX_CLUSTER_NAME_LENGTH = 64
#: What each cluster's variables are called after its prefix (:func:`cluster_env_prefix`).
CLUSTER_VARIABLE_SUFFIXES = ("BOOTSTRAP", "SECURITY_PROTOCOL", "SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD",
                             "SSL_CA_LOCATION", "PORT", "CONTROLLER_PORT")

#: Where the local stack (bin/up) listens when nothing else is configured: client and controller
#: port per cluster, each overridable (``OFFSET_PIPELINE_IDC1_PORT``, ``..._CONTROLLER_PORT``). The
#: stack (devstack/paths.py) starts its brokers on these, so both sides agree without the product
#: importing the dev harness. Only the default names have them: other names need their BOOTSTRAP.
LOCAL_STACK_PORTS = dict(zip(DEFAULT_CLUSTER_NAMES, ((19092, 19093), (29092, 29093))))
# The checkout this package was installed from (editable): the local stack keeps its files there.
_CHECKOUT = Path(__file__).resolve().parents[1]


def cluster_env_prefix(name: str) -> str:
    """The prefix of ``name``'s variables: upper case, every other character than a letter or digit
    an ``_`` (``us-east`` -> ``OFFSET_PIPELINE_US_EAST_``; ``idc1`` -> ``OFFSET_PIPELINE_IDC1_``, as
    before names were configurable)."""
    return f"OFFSET_PIPELINE_{re.sub(r'[^A-Z0-9]', '_', name.upper())}_"


def cluster_names(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``OFFSET_PIPELINE_CLUSTERS="us-east,dc-a"`` -> the two clusters' names (unset or empty:
    ``idc1,idc2``).

    Each name must be exactly what the data mirror writes as the origin in the ``IDC`` header
    (MirrorMaker 2: the cluster alias): a copy whose ``IDC`` names neither cluster is a third
    cluster's (``third_cluster_header``), never an anchor. Invariants, checked here so a bad value
    fails the load with the value named, not a cycle: exactly two names, each non-empty, of
    :data:`CLUSTER_NAME_PATTERN` and at most :data:`MAX_CLUSTER_NAME_LENGTH` characters, distinct,
    and no variable of one cluster is a variable of the other (``us-east`` and ``us_east`` share
    ``OFFSET_PIPELINE_US_EAST_``; ``a`` and ``a-controller`` share ``OFFSET_PIPELINE_A_CONTROLLER_PORT``).
    The order is the order of the Dagster resource slots (``definitions.build_resources``).
    """
    text = _get(os.environ if env is None else env, CLUSTERS_VARIABLE)
    if text is None:
        return DEFAULT_CLUSTER_NAMES
    names = [name.strip() for name in text.split(",")]
    where = f"{CLUSTERS_VARIABLE}={text!r}"
    if len(names) != 2:
        raise SettingsError(f"{where}: expected exactly two cluster names separated by a comma, e.g. 'us-east,dc-a' "
                            f"(got {len(names)})")
    for name in names:
        if not name:
            raise SettingsError(f"{where}: a cluster name is empty")
        if len(name) > MAX_CLUSTER_NAME_LENGTH:
            raise SettingsError(f"{where}: {name[:20]!r}... is longer than {MAX_CLUSTER_NAME_LENGTH} characters")
        if not CLUSTER_NAME_PATTERN.fullmatch(name):
            raise SettingsError(f"{where}: {name!r} is not a cluster name as the mirror writes it in the IDC header: "
                                "letters, digits, '-' and '_', starting with a letter or digit")
    first, second = names
    if first == second:
        raise SettingsError(f"{where}: the two cluster names must differ")
    shared = sorted(set(cluster_variables(first)) & set(cluster_variables(second)))
    if shared:
        raise SettingsError(f"{where}: {first!r} and {second!r} would read the same environment variable "
                            f"({shared[0]}); pick names whose variables differ")
    return first, second


def cluster_variables(name: str) -> tuple[str, ...]:
    """Every environment variable read for cluster ``name``."""
    return tuple(cluster_env_prefix(name) + suffix for suffix in CLUSTER_VARIABLE_SUFFIXES)


def checked_cluster_name(names: tuple[str, str], name: str, where: str) -> str:
    """``name`` when it is one of the configured ``names``; else a SettingsError naming ``where``."""
    if name not in names:
        raise SettingsError(f"{where}: {name!r} is not a configured cluster ({CLUSTERS_VARIABLE}: {', '.join(names)})")
    return name


def local_stack_port(env: Mapping[str, str], name: str, *, controller: bool = False) -> int:
    variable = cluster_env_prefix(name) + ("CONTROLLER_PORT" if controller else "PORT")
    return int(env.get(variable) or LOCAL_STACK_PORTS[name][1 if controller else 0])


def local_stack_dir(env: Mapping[str, str] | None = None) -> Path:
    """The local stack's git-ignored folder (jars, cluster data, logs, pid files):
    ``$OFFSET_PIPELINE_DEVSTACK_DIR``, or ``.devstack`` in the checkout."""
    env = os.environ if env is None else env
    return Path(env.get("OFFSET_PIPELINE_DEVSTACK_DIR") or _CHECKOUT / ".devstack").resolve()


def default_bootstrap(env: Mapping[str, str], name: str) -> str:
    """The local stack's broker for ``name``, on the port the stack was started with
    (``OFFSET_PIPELINE_IDC1_PORT``...), so ``bin/up`` on other ports needs nothing more."""
    return f"127.0.0.1:{local_stack_port(env, name)}"


@dataclass(frozen=True)
class KafkaSettings:
    cluster_name: str
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password_env: str | None = None  # name of the variable holding the password, if set
    ssl_ca_location: str | None = None  # PEM file of the brokers' CA (a path, not a secret)


@dataclass(frozen=True)
class ClickHouseSettings:
    dsn: str
    username: str | None = None
    password_env: str | None = None
    database: str | None = None


@dataclass(frozen=True)
class SparkSettings:
    master: str | None = None
    connect_url: str | None = None
    conf: dict[str, str] = field(default_factory=dict)  # OFFSET_PIPELINE_SPARK_CONF


@dataclass(frozen=True)
class Settings:
    kafka: dict[str, KafkaSettings]  # cluster name -> its settings, in the order of cluster_names
    clickhouse: ClickHouseSettings
    spark: SparkSettings
    # where each mirror keeps its source positions (mirror_position_groups), from the same environment
    mirror_positions: list[dict[str, str]] = field(default_factory=list)


def _get(env: Mapping[str, str], name: str) -> str | None:
    # An empty value (e.g. `FOO=` in a compose file) means "not set", not "empty string".
    value = env.get(name, "").strip()
    return value or None


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where embedded engines keep their files: ``$OFFSET_PIPELINE_DATA_DIR``, or ``data`` in the local
    stack's folder (``<repo>/.devstack/data`` unless ``OFFSET_PIPELINE_DEVSTACK_DIR`` moves it)."""
    env = os.environ if env is None else env
    return Path(_get(env, "OFFSET_PIPELINE_DATA_DIR") or local_stack_dir(env) / "data").resolve()


def default_clickhouse_dsn(env: Mapping[str, str] | None = None) -> str:
    """The embedded ClickHouse engine (chdb) under :func:`data_dir`."""
    return f"chdb://{data_dir(env) / 'clickhouse'}"


def _kafka_settings(env: Mapping[str, str], name: str) -> KafkaSettings:
    prefix = cluster_env_prefix(name)
    password_var = prefix + "SASL_PASSWORD"
    return KafkaSettings(
        cluster_name=name,
        bootstrap_servers=_get(env, prefix + "BOOTSTRAP") or _local_bootstrap(env, name),
        security_protocol=_get(env, prefix + "SECURITY_PROTOCOL") or "PLAINTEXT",
        sasl_mechanism=_get(env, prefix + "SASL_MECHANISM"),
        sasl_username=_get(env, prefix + "SASL_USERNAME"),
        sasl_password_env=password_var if _get(env, password_var) else None,
        ssl_ca_location=_get(env, prefix + "SSL_CA_LOCATION"),
    )


def _local_bootstrap(env: Mapping[str, str], name: str) -> str:
    """The local stack's broker for a default name; any other name has no default address."""
    if name in LOCAL_STACK_PORTS:
        return default_bootstrap(env, name)
    raise SettingsError(f"{cluster_env_prefix(name)}BOOTSTRAP is not set: cluster {name!r} "
                        f"({CLUSTERS_VARIABLE}) has no default address (only the local stack's idc1 and idc2 have)")


def read_settings(env: Mapping[str, str] | None = None) -> Settings:
    """All connection settings, from ``env`` (default: ``os.environ``); defaults are the local stack.
    ``kafka`` holds the two clusters in :func:`cluster_names`' order."""
    env = os.environ if env is None else env
    password_var = "OFFSET_PIPELINE_CLICKHOUSE_PASSWORD"
    return Settings(
        kafka={name: _kafka_settings(env, name) for name in cluster_names(env)},
        clickhouse=ClickHouseSettings(
            dsn=_get(env, "OFFSET_PIPELINE_CLICKHOUSE_DSN") or default_clickhouse_dsn(env),
            username=_get(env, "OFFSET_PIPELINE_CLICKHOUSE_USERNAME"),
            password_env=password_var if _get(env, password_var) else None,
            database=_get(env, "OFFSET_PIPELINE_CLICKHOUSE_DATABASE"),
        ),
        spark=SparkSettings(
            master=_get(env, "OFFSET_PIPELINE_SPARK_MASTER"),
            connect_url=_get(env, "OFFSET_PIPELINE_SPARK_CONNECT_URL"),
            conf=spark_conf_setting(env),
        ),
        mirror_positions=mirror_position_groups(env),
    )


def spark_conf_setting(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``OFFSET_PIPELINE_SPARK_CONF="spark.pyspark.python=/opt/py/bin/python,spark.executor.memory=2g"``
    -> Spark settings passed through to the session (on a cluster, ``spark.pyspark.python`` names the
    executors' Python). A malformed entry fails at load time, named."""
    env = os.environ if env is None else env
    raw = _get(env, "OFFSET_PIPELINE_SPARK_CONF") or ""
    out: dict[str, str] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key.strip().startswith("spark.") or not value.strip():
            raise SettingsError(f"OFFSET_PIPELINE_SPARK_CONF: {entry!r} is not spark.<setting>=<value>")
        out[key.strip()] = value.strip()
    return out


def parsed_topic_shapes(env: Mapping[str, str] | None = None) -> dict[str, TopicShape]:
    """:func:`topic_shapes`, each value parsed into its :class:`TopicShape`."""
    from offset_pipeline.translation.shape import parse_shape

    return {topic: parse_shape(text) for topic, text in topic_shapes(env).items()}


def topic_shapes(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``OFFSET_PIPELINE_TOPIC_SHAPES="orders=two_way,shipments=one_way:us-east"`` -> topic -> shape.

    Topics not listed are of unknown shape and get header anchors only (the safe default). Each
    shape is checked here, and a one-way shape's producing cluster must be one of
    :func:`cluster_names` (a shape naming no configured cluster would quietly never allow the
    timestamp search), so a typo fails at load time with the entry named, not mid-cycle.
    """
    from offset_pipeline.translation.shape import parse_shape

    env = os.environ if env is None else env
    text = _get(env, "OFFSET_PIPELINE_TOPIC_SHAPES")
    shapes: dict[str, str] = {}
    for entry in (text or "").split(","):
        if not entry.strip():
            continue
        topic, sep, shape = entry.strip().rpartition("=")
        if not sep or not topic:
            raise SettingsError(f"OFFSET_PIPELINE_TOPIC_SHAPES entry {entry!r}: expected TOPIC=SHAPE")
        try:
            parsed = parse_shape(shape)
        except ValueError as exc:
            raise SettingsError(f"OFFSET_PIPELINE_TOPIC_SHAPES entry {entry!r}: {exc}") from None
        if parsed is not None and parsed.producer is not None:
            checked_cluster_name(cluster_names(env), parsed.producer, f"OFFSET_PIPELINE_TOPIC_SHAPES entry {entry!r}")
        shapes[topic] = shape.strip()
    return shapes


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def dry_run_default(env: Mapping[str, str] | None = None) -> bool:
    """``OFFSET_PIPELINE_DRY_RUN``: the commit step's default ``dry_run`` (unset or empty: False).

    Accepts 1/true/yes/on and 0/false/no/off in any case; anything else fails at load time with
    the value named, so a typo never silently turns commits on.
    """
    return _flag(env, "OFFSET_PIPELINE_DRY_RUN")


def _flag(env: Mapping[str, str] | None, name: str, default: bool = False) -> bool:
    """A yes/no variable (unset or empty: ``default``); anything unrecognized fails, naming the value."""
    text = _get(os.environ if env is None else env, name)
    if text is None:
        return default
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise SettingsError(f"{name}={text!r}: expected one of {', '.join(_TRUE + _FALSE)}")


MIRROR_POSITION_GROUP_KIND = "group"
MIRROR_POSITION_OFFSETS_KIND = "connect-offsets"
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def mirror_position_groups(env: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """Where each mirror keeps its source positions (``resources/mirrors.py``).

    ``OFFSET_PIPELINE_MIRROR_POSITIONS``: comma-separated entries, one per direction, each
    ``SOURCE->TARGET=CLUSTER:WHERE``, the cluster holding the positions and where on it:

    * ``CLUSTER:GROUP_ID`` or ``CLUSTER:group:GROUP_ID`` -- the committed offsets of a consumer group
      (a mirror that keeps its positions as a group, such as the devstack's Python mirror). The group
      id is everything after the first ``:`` (after ``group:`` when given: the way to name a group
      whose id itself begins with ``group:`` or ``connect-offsets:``);
    * ``CLUSTER:connect-offsets:TOPIC`` -- MirrorMaker 2's source offsets in a Kafka Connect offsets
      topic (dedicated mode: ``mm2-offsets.<SOURCE>.internal`` on the target cluster; a Connect
      cluster: its workers' ``offset.storage.topic``), the flow's being those whose source alias is
      SOURCE. TOPIC must be a legal Kafka topic name (letters, digits, ``.``, ``_``, ``-``; at most 249).

    ``"us-east->dc-a=dc-a:connect-offsets:mm2-offsets.us-east.internal,dc-a->us-east=us-east:my-group"``.
    Every cluster named is one of :func:`cluster_names`, and a direction goes from one to the other.
    Unset: the devstack mirror's groups (``offset-pipeline-mirror.<source>-to-<target>``), on each
    target cluster. A malformed entry fails at load time with the entry named. An entry is a dict
    with ``source``, ``target``, ``stored_on`` and either ``group_id`` or ``offsets_topic``.
    """
    env = os.environ if env is None else env
    names = cluster_names(env)
    text = _get(env, "OFFSET_PIPELINE_MIRROR_POSITIONS")
    if text is None:
        return [
            {"source": s, "target": t, "stored_on": t, "group_id": f"offset-pipeline-mirror.{s}-to-{t}"}
            for s in names for t in names if s != t
        ]
    groups = []
    seen: set[tuple[str, str]] = set()
    for entry in text.split(","):
        if not entry.strip():
            continue
        direction, sep, where = entry.strip().partition("=")
        source, arrow, target = direction.partition("->")
        stored_on, colon, location = where.partition(":")
        named = f"OFFSET_PIPELINE_MIRROR_POSITIONS entry {entry!r}"
        if not (sep and arrow and colon and source.strip() and target.strip() and stored_on.strip() and location):
            raise SettingsError(
                f"{named}: expected SOURCE->TARGET=CLUSTER:GROUP_ID or SOURCE->TARGET=CLUSTER:connect-offsets:TOPIC"
            )
        source, target, stored_on = (checked_cluster_name(names, n.strip(), named) for n in (source, target, stored_on))
        if source == target:
            raise SettingsError(f"{named}: a mirror copies from one cluster to the other, not to {source!r} itself")
        if (source, target) in seen:
            raise SettingsError(f"{named}: {source}->{target} is given twice")
        seen.add((source, target))
        kind, kind_sep, rest = location.partition(":")
        if kind_sep and kind == MIRROR_POSITION_OFFSETS_KIND:
            topic = rest.strip()
            if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
                raise SettingsError(f"{named}: {topic!r} is not a Kafka topic name (connect-offsets:TOPIC)")
            groups.append({"source": source, "target": target, "stored_on": stored_on, "offsets_topic": topic})
            continue
        group_id = rest if kind_sep and kind == MIRROR_POSITION_GROUP_KIND else location
        if not group_id:
            raise SettingsError(f"{named}: the group id is empty (group:GROUP_ID)")
        groups.append({"source": source, "target": target, "stored_on": stored_on, "group_id": group_id})
    return groups


def stale_window_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_STALE_WINDOW_S``: how long both log ends must not move before a partition is
    fast-forwarded (docs/operating/fast-forward.md; default 600). Must be positive."""
    return positive_number(env, "OFFSET_PIPELINE_STALE_WINDOW_S", 600.0)


def audit_start_date(env: Mapping[str, str] | None = None) -> str:
    """``OFFSET_PIPELINE_AUDIT_START_DATE`` (YYYY-MM-DD, default 2026-01-01): the first day the audit's
    daily partitions offer. Checked at load time."""
    from datetime import date

    text = _get(os.environ if env is None else env, "OFFSET_PIPELINE_AUDIT_START_DATE") or "2026-01-01"
    try:
        date.fromisoformat(text)
    except ValueError:
        raise SettingsError(f"OFFSET_PIPELINE_AUDIT_START_DATE={text!r}: expected YYYY-MM-DD") from None
    return text


DEFAULT_AUDIT_SCHEDULE_CRON = "20 0 * * *"


def audit_schedule_cron(env: Mapping[str, str] | None = None) -> str:
    """``OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON`` (UTC; default ``20 0 * * *``, 20 minutes after midnight,
    when the day's snapshots are all in): when ``offset_failover_audit_schedule`` audits the latest
    complete day. Checked at load time with Dagster's own test, so a value that passes is one the
    schedule accepts; anything else fails, named."""
    return _cron(env, "OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON", DEFAULT_AUDIT_SCHEDULE_CRON)


DEFAULT_MIRROR_CHECK_CRON = "*/10 * * * *"


def mirror_check_cron(env: Mapping[str, str] | None = None) -> str:
    """``OFFSET_PIPELINE_MIRROR_CHECK_CRON`` (UTC; default every 10 minutes): when
    ``offset_mirror_check_schedule`` checks which proof the mirror gives each topic and direction."""
    return _cron(env, "OFFSET_PIPELINE_MIRROR_CHECK_CRON", DEFAULT_MIRROR_CHECK_CRON)


def _cron(env: Mapping[str, str] | None, variable: str, default: str) -> str:
    """A cron setting, checked with Dagster's own test (a value that passes is one a schedule accepts)."""
    from dagster._utils.schedules import is_valid_cron_string

    text = (_get(os.environ if env is None else env, variable) or default).strip()
    if not is_valid_cron_string(text):
        raise SettingsError(f"{variable}={text!r}: expected a cron schedule of five fields, e.g. {default!r}")
    return text


def mirror_writes_headers(env: Mapping[str, str] | None = None) -> bool:
    """``OFFSET_PIPELINE_MIRROR_WRITES_HEADERS``: the data mirrors mark every copy with its origin
    (``IDC``/``Offset`` headers, the devstack mirror). Default on. Off for a mirror that writes none
    (MirrorMaker 2): headers on the standby are then never trusted, one-way topics are translated by
    timestamp search alone, and two-way topics have no anchor."""
    return _flag(env, "OFFSET_PIPELINE_MIRROR_WRITES_HEADERS", default=True)


def mirror_exactly_once(env: Mapping[str, str] | None = None) -> bool:
    """``OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE``: the data mirrors copy each record once, in order (the
    devstack mirror; MirrorMaker 2 with exactly-once). Default off: the audit then reads more."""
    return _flag(env, "OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE")


def positive_number(env: Mapping[str, str] | None, name: str, default, unit: str = "seconds", whole: bool = False):
    """A positive number (of ``unit``; an int with ``whole``) from ``name`` (unset or empty:
    ``default``); anything else fails at load time with the value named."""
    text = _get(os.environ if env is None else env, name)
    if text is None:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = -1
    if not value > 0:
        raise SettingsError(f"{name}={text!r}: expected a positive {'whole ' if whole else ''}number of {unit}")
    return value


def kafka_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_KAFKA_TIMEOUT_S`` (default 10): the bound of every Kafka wait of a cycle
    (admin requests, reads, commits), per cluster. A cluster that does not answer within it is
    ``cluster_unavailable`` for this cycle; the next cycle tries again."""
    return positive_number(env, "OFFSET_PIPELINE_KAFKA_TIMEOUT_S", 10.0)


SYNC_MODES = ("continuous", "interval")


def sync_mode(env: Mapping[str, str] | None = None) -> str:
    """``OFFSET_PIPELINE_SYNC_MODE`` (default ``continuous``): ``continuous`` keeps one long run of
    back-to-back incremental cycles going (job ``offset_sync_continuous``, rolled over every
    ``continuous_run_s``); ``interval`` launches one full cycle per ``OFFSET_PIPELINE_SYNC_INTERVAL_S``
    (job ``offset_sync_cycle``). Anything else fails at load time."""
    text = (_get(os.environ if env is None else env, "OFFSET_PIPELINE_SYNC_MODE") or "continuous").strip().lower()
    if text not in SYNC_MODES:
        raise SettingsError(f"OFFSET_PIPELINE_SYNC_MODE={text!r}: expected one of {', '.join(SYNC_MODES)}")
    return text


def continuous_run_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_CONTINUOUS_RUN_S`` (default 900): how long one continuous run syncs before it
    ends and the sensor starts the next (its Dagster storage stays bounded, new code takes effect,
    queued fast-forwards run in between)."""
    return positive_number(env, "OFFSET_PIPELINE_CONTINUOUS_RUN_S", 900.0)


def follow_commit_log(env: Mapping[str, str] | None = None) -> bool:
    """``OFFSET_PIPELINE_FOLLOW_COMMIT_LOG`` (default on): a continuous run follows both clusters'
    ``__consumer_offsets`` and reads only the groups that committed; off (or a principal without Read
    on it), every cycle lists every group."""
    return _flag(env, "OFFSET_PIPELINE_FOLLOW_COMMIT_LOG", default=True)


def reconcile_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_RECONCILE_S`` (default 60): while the commit logs are followed, how often a
    continuous cycle lists every group anyway and compares the listing with what it followed."""
    return positive_number(env, "OFFSET_PIPELINE_RECONCILE_S", 60.0)


def checkpoint_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_CHECKPOINT_S`` (default 30): how often a continuous run writes its state to
    ClickHouse as one cycle (snapshot, translations, commits, monitoring rows)."""
    return positive_number(env, "OFFSET_PIPELINE_CHECKPOINT_S", 30.0)


def clickhouse_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_CLICKHOUSE_TIMEOUT_S`` (default 30): connect and query bound of every
    ClickHouse call (a server's HTTP timeouts; the embedded engine's wait for its data path)."""
    return positive_number(env, "OFFSET_PIPELINE_CLICKHOUSE_TIMEOUT_S", 30.0)


def spark_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_SPARK_TIMEOUT_S`` (default 120): how long the translation's Spark job may
    take (a Spark Connect server must answer its first call within ``spark_connect_timeout_s``);
    past it the job is interrupted and its group-partitions get ``spark_unavailable``."""
    return positive_number(env, "OFFSET_PIPELINE_SPARK_TIMEOUT_S", 120.0)


def translation_budget_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_TRANSLATION_BUDGET_S`` (default 60): how long a cycle's translation may
    read Kafka. Past it, the partitions not read yet get ``translation_deferred`` (no commit, anchors
    kept) and go first in the next cycle, so a cycle that cannot finish still syncs what it read
    instead of losing everything to the Spark bound (``spark_timeout_s``) and starting over."""
    return positive_number(env, "OFFSET_PIPELINE_TRANSLATION_BUDGET_S", 60.0)


def spark_connect_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_SPARK_CONNECT_TIMEOUT_S`` (default 10): how long a Spark Connect server
    may take to accept a connection before the cycle calls Spark unavailable."""
    return positive_number(env, "OFFSET_PIPELINE_SPARK_CONNECT_TIMEOUT_S", 10.0)


def clickhouse_spool_dir(env: Mapping[str, str] | None = None, default: bool = False) -> str | None:
    """``OFFSET_PIPELINE_CLICKHOUSE_SPOOL_DIR``: where inserts wait while ClickHouse is unavailable
    (``storage/deferred_writes.py``). Unset: None (the resource puts it beside the embedded
    engine's folder), or with ``default``, ``clickhouse-spool`` under :func:`data_dir`."""
    env = os.environ if env is None else env
    text = _get(env, "OFFSET_PIPELINE_CLICKHOUSE_SPOOL_DIR")
    if text is None and not default:
        return None
    return str(Path(text or data_dir(env) / "clickhouse-spool").resolve())


def clickhouse_spool_max_mb(env: Mapping[str, str] | None = None) -> float:
    """``OFFSET_PIPELINE_CLICKHOUSE_SPOOL_MAX_MB`` (default 512): past it the oldest waiting inserts
    are dropped, and counted."""
    return positive_number(env, "OFFSET_PIPELINE_CLICKHOUSE_SPOOL_MAX_MB", 512.0, unit="megabytes")


OFFSET_SYNCS_VARIABLE = "OFFSET_PIPELINE_OFFSET_SYNCS"
OFFSET_SYNCS_OFF = "off"


@dataclass(frozen=True)
class OffsetSyncsTopic:
    """Where MirrorMaker 2 keeps the offset syncs of the flow ``source -> target``: topic ``topic``
    on cluster ``stored_on``. Its pairs serve the groups active on ``source`` (standby ``target``)."""

    source: str
    target: str
    stored_on: str
    topic: str


def _mm2_offset_syncs_topic(source: str, target: str, location: str) -> OffsetSyncsTopic:
    # MirrorMaker 2's own naming (its offset-syncs.topic.location): on the source the topic is named
    # after the target alias, on the target after the source alias. The aliases are the cluster names.
    if location == "target":
        return OffsetSyncsTopic(source, target, target, f"mm2-offset-syncs.{source}.internal")
    return OffsetSyncsTopic(source, target, source, f"mm2-offset-syncs.{target}.internal")


def offset_syncs_topics(env: Mapping[str, str] | None = None,
                        writes_headers: bool | None = None) -> list[OffsetSyncsTopic]:
    """The offset-syncs topic the sync reads for each direction (``sync/offset_sync_step.py``), one
    read per cycle and topic; its pairs translate one-way topics mirrored without origin headers.

    ``OFFSET_PIPELINE_OFFSET_SYNCS``: ``off`` (none read), or comma-separated entries, one per
    direction, ``SOURCE->TARGET=WHERE``:

    * ``source`` -- MirrorMaker 2's default: ``mm2-offset-syncs.<TARGET>.internal`` on SOURCE;
    * ``target`` -- a flow run with ``offset-syncs.topic.location=target``:
      ``mm2-offset-syncs.<SOURCE>.internal`` on TARGET;
    * ``CLUSTER:TOPIC`` -- any other name (MirrorMaker 2's aliases differ from the cluster names, a
      Connect cluster's connector), on CLUSTER;
    * ``off`` -- this direction has no offset syncs.

    A direction not listed gets the default. Unset: the default for both directions when
    ``OFFSET_PIPELINE_MIRROR_WRITES_HEADERS`` is off (a mirror without origin headers, MirrorMaker
    2), none otherwise (the origin headers prove more, and the pairs are not used with them);
    ``writes_headers`` (a run's config) stands for that variable when given.
    Every cluster named is one of :func:`cluster_names`; a malformed entry fails at load time with
    the entry named."""
    env = os.environ if env is None else env
    names = cluster_names(env)
    text = (_get(env, OFFSET_SYNCS_VARIABLE) or "").strip()
    directions = [(s, t) for s in names for t in names if s != t]
    if not text:
        headers = mirror_writes_headers(env) if writes_headers is None else writes_headers
        return [] if headers else [_mm2_offset_syncs_topic(s, t, "source") for s, t in directions]
    if text.lower() == OFFSET_SYNCS_OFF:
        return []
    chosen: dict[tuple[str, str], OffsetSyncsTopic | None] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        direction, sep, where = entry.strip().partition("=")
        source, arrow, target = direction.partition("->")
        named = f"{OFFSET_SYNCS_VARIABLE} entry {entry!r}"
        where = where.strip()
        if not (sep and arrow and source.strip() and target.strip() and where):
            raise SettingsError(f"{named}: expected SOURCE->TARGET=source, =target, =CLUSTER:TOPIC or =off")
        source, target = (checked_cluster_name(names, n.strip(), named) for n in (source, target))
        if source == target:
            raise SettingsError(f"{named}: a mirror copies from one cluster to the other, not to {source!r} itself")
        if (source, target) in chosen:
            raise SettingsError(f"{named}: {source}->{target} is given twice")
        if where.lower() == OFFSET_SYNCS_OFF:
            chosen[(source, target)] = None
        elif where.lower() in ("source", "target"):
            chosen[(source, target)] = _mm2_offset_syncs_topic(source, target, where.lower())
        else:
            stored_on, colon, topic = where.partition(":")
            if not colon:
                raise SettingsError(f"{named}: expected source, target, CLUSTER:TOPIC or off after '='")
            stored_on, topic = checked_cluster_name(names, stored_on.strip(), named), topic.strip()
            if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
                raise SettingsError(f"{named}: {topic!r} is not a Kafka topic name")
            chosen[(source, target)] = OffsetSyncsTopic(source, target, stored_on, topic)
    out = []
    for source, target in directions:
        if (source, target) not in chosen:
            out.append(_mm2_offset_syncs_topic(source, target, "source"))
        elif chosen[(source, target)] is not None:
            out.append(chosen[(source, target)])
    return out

"""The least Kafka rights the sync principal needs for a sync cycle, the stale fast-forward and the
failover audit, as ACLs: created with the AdminClient on a secure dev cluster, and written as the
equivalent ``kafka-acls.sh`` commands (README, "Connecting to secured clusters").

Found by running a sync cycle as that principal on a secure broker (tests/secure/) and adding only
what it was refused. Per cluster, for the topics it syncs and the groups it syncs, plus the
mirror's position group on the cluster that holds it:

* topics: ``READ`` (the records it reads to translate; a group commit needs it too) and
  ``DESCRIBE_CONFIGS`` (``message.timestamp.type``; refused, both clusters read as unavailable);
* groups: ``READ`` (the standby commit; refused, the commit is decided but not applied);
* ``DESCRIBE`` (metadata, list offsets, offset fetch, the group listing and descriptions) is not
  granted on its own: Kafka implies it from ``READ``, and the cycle commits without it (tried);
* groups named ``offset-pipeline-``...: ``DESCRIBE``. The sync's own record readers are consumers
  that only ``assign`` (never join nor commit), but librdkafka still looks up the coordinator of
  their group (``offset-pipeline-reads-<uuid>``, ``offset-pipeline-shape-sample-<uuid>``), and
  refused, every read fails with ``GROUP_AUTHORIZATION_FAILED``. The mirror's default position groups
  (``offset-pipeline-mirror.<source>-to-<target>``, only read) are under that prefix too;
* a mirror position group named otherwise (``OFFSET_PIPELINE_MIRROR_POSITIONS``): ``DESCRIBE``.

Nothing on the cluster resource: the group listing answers with the groups the principal may
describe, and every other call names its topic or group.

The other jobs need less, found the same way (each run as ``sync`` holding only the rights under
test, one taken away at a time; tests/secure/test_secure_jobs.py), so one principal holding the
sync's rights runs every job, and :func:`fast_forward_rights` / :func:`audit_rights` say what a job
run under a principal of its own would need:

* the **stale fast-forward** (``stale_partition_sensor`` and ``offset_fast_forwards``): topics
  ``READ`` (the gap reads that prove only transaction markers lie between a position and a log
  end, and the commit; the sensor alone gets by with the ``DESCRIBE`` it implies: log ends),
  groups ``READ`` (the standby commit; with ``DESCRIBE`` only, the sensor and the job's re-reads
  pass and the commit is refused, ``GROUP_AUTHORIZATION_FAILED``), ``DESCRIBE`` on
  ``offset-pipeline-``... (the mirror positions, read by sensor and job: refused, every partition
  is ``mirror_position_unknown``; and the gap readers' throwaway groups: refused, the job's live
  re-read fails). Not ``DESCRIBE_CONFIGS``: it reads no topic configuration;
* the **failover audit** (``offset_failover_audit``, its Spark tasks): topics ``READ`` (the records
  of both logs; with ``DESCRIBE`` only the log ranges answer, the record reads are refused) and
  ``DESCRIBE`` on ``offset-pipeline-``... (its readers' throwaway groups). No group of the
  application (its moments come from ClickHouse), no mirror position, no topic configuration.
  A refused read makes that topic-partition's moments ``cluster_unavailable``, naming the error.

The continuous mode is the sync: the same clients, the same rights (:func:`sync_rights`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The prefix of the groups the sync's own clients use (readers, shape samples) and of the devstack
#: mirror's position groups.
OWN_GROUPS = "offset-pipeline-"

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)


@dataclass(frozen=True)
class Right:
    """Some operations on the topics or groups named ``name`` (a name, or a prefix)."""

    resource: str  # "topic" or "group"
    name: str
    prefixed: bool
    operations: tuple[str, ...]  # AclOperation names: "DESCRIBE", "READ", ...


def sync_rights(topics: str, groups: str, mirror_position_group: str | None = None, *,
                prefixed: bool = True) -> list[Right]:
    """The sync's rights on one cluster: topics and groups named by ``topics`` and ``groups``
    (prefixes unless ``prefixed`` is False), its own groups, and ``DESCRIBE`` on the mirror's
    position group kept on this cluster when that is not one of :data:`OWN_GROUPS`."""
    rights = [
        Right("topic", topics, prefixed, ("READ", "DESCRIBE_CONFIGS")),
        Right("group", groups, prefixed, ("READ",)),
        Right("group", OWN_GROUPS, True, ("DESCRIBE",)),
    ]
    if mirror_position_group and not mirror_position_group.startswith(OWN_GROUPS):
        rights.append(Right("group", mirror_position_group, False, ("DESCRIBE",)))
    return rights


def fast_forward_rights(topics: str, groups: str, mirror_position_group: str | None = None, *,
                        prefixed: bool = True) -> list[Right]:
    """The stale fast-forward's rights on one cluster (sensor and job; module docstring): the
    sync's without ``DESCRIBE_CONFIGS``."""
    rights = [
        Right("topic", topics, prefixed, ("READ",)),
        Right("group", groups, prefixed, ("READ",)),
        Right("group", OWN_GROUPS, True, ("DESCRIBE",)),
    ]
    if mirror_position_group and not mirror_position_group.startswith(OWN_GROUPS):
        rights.append(Right("group", mirror_position_group, False, ("DESCRIBE",)))
    return rights


def connect_offsets_rights(offsets_topic: str) -> list[Right]:
    """What the sync and the stale fast-forward need on the cluster holding a MirrorMaker 2 flow's
    Connect offsets topic (``OFFSET_PIPELINE_MIRROR_POSITIONS=...:connect-offsets:TOPIC``): ``READ``
    on that topic (its records are the mirror's positions; ``DESCRIBE``, for its partitions and log
    ends, is implied). Its readers' groups are among :data:`OWN_GROUPS`, granted with the sync's."""
    return [Right("topic", offsets_topic, False, ("READ",))]


def commit_log_rights() -> list[Right]:
    """What a continuous run needs on a cluster to follow its group-commit log: ``READ`` on
    ``__consumer_offsets`` (the follower's throwaway group is among :data:`OWN_GROUPS`). Without it
    the run lists every group each cycle instead, which needs none of it."""
    return [Right("topic", "__consumer_offsets", False, ("READ",))]


def audit_rights(topics: str, *, prefixed: bool = True) -> list[Right]:
    """The failover audit's rights on one cluster (module docstring): the records of the audited
    topics, through readers in groups of its own."""
    return [
        Right("topic", topics, prefixed, ("READ",)),
        Right("group", OWN_GROUPS, True, ("DESCRIBE",)),
    ]


def acl_bindings(principal: str, rights: list[Right]) -> list[AclBinding]:
    return [
        AclBinding(ResourceType[right.resource.upper()], right.name,
                   ResourcePatternType.PREFIXED if right.prefixed else ResourcePatternType.LITERAL,
                   principal, "*", AclOperation[operation], AclPermissionType.ALLOW)
        for right in rights for operation in right.operations
    ]


def grant(admin_config: dict, principal: str, rights: list[Right], timeout_s: float = 30.0) -> None:
    """Create the ACLs (as a principal allowed to, e.g. a super user); raises naming a refused one."""
    admin = AdminClient(admin_config)
    for binding, future in admin.create_acls(acl_bindings(principal, rights), request_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            raise RuntimeError(f"creating ACL {binding} failed: {exc.args[0] if exc.args else exc}") from exc


def revoke_all(admin_config: dict, principal: str, timeout_s: float = 30.0) -> int:
    """Delete every ACL of ``principal`` (as a principal allowed to); returns how many there were.
    For the tests, which give one principal one job's rights after another."""
    admin = AdminClient(admin_config)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    deleted = 0
    for future in admin.delete_acls([everything], request_timeout=timeout_s).values():
        deleted += len(future.result(timeout=timeout_s))
    return deleted


def kafka_acls_commands(principal: str, rights: list[Right], *, bootstrap: str = "$BOOTSTRAP",
                        admin_config_file: str = "admin.properties") -> list[str]:
    """The same rights as ``kafka-acls.sh`` commands, one per right."""
    commands = []
    for right in rights:
        operations = " ".join(f"--operation {_cli_operation(op)}" for op in right.operations)
        pattern = " --resource-pattern-type prefixed" if right.prefixed else ""
        commands.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config {admin_config_file} "
            f"--add --allow-principal {principal} {operations} --{right.resource} '{right.name}'{pattern}"
        )
    return commands


def _cli_operation(operation: str) -> str:
    return "".join(word.capitalize() for word in operation.split("_"))  # DESCRIBE_CONFIGS -> DescribeConfigs

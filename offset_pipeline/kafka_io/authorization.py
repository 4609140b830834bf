"""A request the broker refused for want of an ACL, as status ``not_authorized`` with a reason that
names the cluster, the topic or group, and the ``kafka-acls.sh`` right to grant.

Pure: the input is the error text of a failed read or commit (a ``KafkaException``, or the string
the sync kept of it, which carries the broker's error name: ``TOPIC_AUTHORIZATION_FAILED``,
``GROUP_AUTHORIZATION_FAILED``, ...). The rights are those of the README's "The sync principal's
rights": ``Read`` on a topic and on a group (Kafka implies ``Describe`` from it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The broker's error names for a refused request, per resource kind.
REFUSED_RESOURCE = {
    "TOPIC_AUTHORIZATION_FAILED": "topic",
    "GROUP_AUTHORIZATION_FAILED": "group",
    "CLUSTER_AUTHORIZATION_FAILED": "cluster",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "transactional id",
}
_REFUSED = re.compile("|".join(REFUSED_RESOURCE))
#: The prefix of the groups the sync's own record readers are in (partition_records.py,
#: header_sample.py): refused there, the reads fail with GROUP_AUTHORIZATION_FAILED.
OWN_GROUPS_PREFIX = "offset-pipeline-"


@dataclass(frozen=True)
class Refusal:
    resource: str  # "topic", "group", "cluster", "transactional id"
    code: str  # the broker's error name


def refusal(error: BaseException | str | None) -> Refusal | None:
    """The refusal in ``error`` (an exception or its text), or None when it is no authorization failure."""
    if error is None:
        return None
    text = error if isinstance(error, str) else _exception_text(error)
    found = _REFUSED.search(text)
    return Refusal(REFUSED_RESOURCE[found.group(0)], found.group(0)) if found else None


def _exception_text(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {exc}"]
    for arg in getattr(exc, "args", ()):
        name = getattr(arg, "name", None)  # a KafkaError
        if callable(name):
            parts.append(name())
    return " ".join(parts)


def _principal(user: str | None) -> str:
    return f"User:{user}" if user else "User:<the sync's user>"


def not_authorized_reason(error: BaseException | str, cluster: str, *, topic: str | None = None,
                          group: str | None = None, user: str | None = None, doing: str = "") -> str | None:
    """Why a request for ``topic`` or ``group`` on ``cluster`` was refused and the ACL to add, or
    None when ``error`` is not an authorization failure.

    A topic refusal names ``topic``; a group refusal while reading records (``doing`` mentions
    reading, no ``group``) is the readers' own group; otherwise it names ``group``."""
    refused = refusal(error)
    if refused is None:
        return None
    who = _principal(user)
    what = f" while {doing}" if doing else ""
    add = f"kafka-acls.sh --bootstrap-server <{cluster}> --add --allow-principal {who}"
    if refused.resource == "topic" and topic is not None:
        return (f"not authorized on {cluster}{what}: {who} may not read topic {topic!r} ({refused.code}) — grant it: "
                f"{add} --operation Read --operation DescribeConfigs --topic {topic!r}")
    if refused.resource == "group" and group is not None:
        return (f"not authorized on {cluster}{what}: {who} may not read group {group!r} ({refused.code}) — grant it: "
                f"{add} --operation Read --group {group!r}")
    if refused.resource == "group":
        return (f"not authorized on {cluster}{what}: {who} may not use the sync's own reader groups "
                f"({OWN_GROUPS_PREFIX}...; {refused.code}) — grant it: {add} --operation Describe "
                f"--group '{OWN_GROUPS_PREFIX}' --resource-pattern-type prefixed")
    return (f"not authorized on {cluster}{what}: {who} was refused on the {refused.resource} ({refused.code}) — "
            "see README 'The sync principal's rights'")

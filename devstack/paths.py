"""Where the local stack keeps its files, and its default ports. One place, so every command agrees."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def stack_dir(env: Mapping[str, str] | None = None) -> Path:
    """The git-ignored folder holding jars, cluster data, logs and pid files."""
    env = os.environ if env is None else env
    return Path(env.get("OFFSET_PIPELINE_DEVSTACK_DIR") or REPO_ROOT / ".devstack").resolve()


def jars_dir() -> Path:
    # Jars are shared by every stack (tests included): fetched once, then cached.
    return Path(os.environ.get("OFFSET_PIPELINE_JARS_DIR", REPO_ROOT / ".devstack" / "jars")).resolve()


@dataclass(frozen=True)
class ClusterPorts:
    name: str
    port: int
    controller_port: int


DEFAULT_PORTS = (
    ClusterPorts("idc1", 19092, 19093),
    ClusterPorts("idc2", 29092, 29093),
)


def cluster_ports(env: Mapping[str, str] | None = None) -> tuple[ClusterPorts, ...]:
    """The default ports, each overridable: ``OFFSET_PIPELINE_IDC1_PORT``, ``..._CONTROLLER_PORT``."""
    env = os.environ if env is None else env
    return tuple(
        ClusterPorts(
            p.name,
            int(env.get(f"OFFSET_PIPELINE_{p.name.upper()}_PORT") or p.port),
            int(env.get(f"OFFSET_PIPELINE_{p.name.upper()}_CONTROLLER_PORT") or p.controller_port),
        )
        for p in DEFAULT_PORTS
    )


DEFAULT_SPARK_CONNECT_PORT = 15002


def spark_connect_port() -> int:
    """The local Spark Connect server's port: ``OFFSET_PIPELINE_SPARK_CONNECT_PORT``, default 15002."""
    return int(os.environ.get("OFFSET_PIPELINE_SPARK_CONNECT_PORT", DEFAULT_SPARK_CONNECT_PORT))

"""The Python of the Spark standalone cluster's executors (``devstack/spark_standalone.py``).

A virtual environment of its own under ``.devstack/``, with only what the translation's Spark tasks
import besides the standard library and the project (``confluent-kafka``: the reads; ``pyarrow``:
``mapInArrow``), at the versions the driver has. PySpark itself comes from the workers' Spark
distribution (``python/lib/pyspark.zip``). **Not offset_pipeline**: the project reaches executors as
it reaches a real cluster's, shipped with each job (``resources/spark.py``), so a test on this
cluster shows that shipping works. What a real cluster's executors need is the same list
(README, "Spark on a cluster").
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from devstack.errors import DevStackError

#: What the executors import, by distribution name (their versions follow the driver's).
EXECUTOR_PACKAGES = ("confluent-kafka", "pyarrow")


def executor_requirements() -> list[str]:
    return [f"{name}=={metadata.version(name)}" for name in EXECUTOR_PACKAGES]


def ensure_executor_python(venv_dir: Path) -> str:
    """The executors' interpreter in ``venv_dir``, made (or brought to the driver's versions) when
    needed; quick when it is there. Same Python minor version as the driver (PySpark requires it)."""
    python = venv_dir / "bin" / "python"
    wanted = "\n".join([sys.version.split()[0], *executor_requirements()])
    stamp = venv_dir / ".installed"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return str(python)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv_dir)], check=True, capture_output=True,
                       timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *executor_requirements()], check=True, capture_output=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        raise DevStackError(f"making the executors' Python in {venv_dir} failed: {exc.stderr.decode(errors='replace')[-2000:]}") from exc
    except subprocess.TimeoutExpired as exc:
        raise DevStackError(f"making the executors' Python in {venv_dir} took too long: {exc}") from exc
    stamp.write_text(wanted)
    return str(python)


def imports(python: str, module: str) -> bool:
    """Whether ``python`` can import ``module`` (the executors' one must not import offset_pipeline)."""
    # from the root folder: not from a checkout whose folder would import as the package
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60, cwd="/",
                          check=False).returncode == 0

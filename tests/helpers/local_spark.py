"""Local Spark (the sync's default engine) stopped in this process, when a test started it."""

from __future__ import annotations

import sys


def stop_local_spark() -> None:
    """Stop this process's local Spark context, if one runs: its Python workers hold pooled read
    consumers that would keep reconnecting (and logging) to brokers a test has stopped."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()

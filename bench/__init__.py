"""The benchmarks: each prints its figures and asserts nothing (the tests assert; see
docs/development/tests.md). Not part of the installed package; the repository root is on the venv's
path (``bin/setup``), so each runs from the repository root as ``.venv/bin/python -m bench.<name>``.
``python -m bench`` prints this list.

Benchmarks with a results page (docs/results/, the latest run in bench/results/<folder>/):

===========================  =====================  ================================================
module                       bench/results/         what it measures
===========================  =====================  ================================================
``scale_curve``              ``scale-curve``        one interval cycle at 1k to 100k group-partitions, ``local[2]`` and standalone Spark
``freshness``                ``freshness``          how far behind the continuous mode keeps standby offsets at 10k group-partitions
``compare_mm2``              ``compare-mm2``        failover cost and staleness against MirrorMaker 2 (``bin/compare-mm2``)
``soak``                     ``soak``               an hour of the real stack and Dagster daemon with faults (``bin/soak``)
``clickhouse_bytes``,        ``storage``            ClickHouse bytes per row and codecs, per-cycle reads over days of history
``clickhouse_upkeep_effect``,
``history_reads``
``failover_trials``          ``failover-trials``    lost and duplicated records of real failovers, by topic shape
``transform_throughput``     ``transform-throughput``  MirrorMaker 2's copy rate with the project's transform
===========================  =====================  ================================================

More benchmarks (figures in their docstrings and on the results pages that use them):
``cycle_benchmark`` (one 10k cycle, its stages against the floor), ``translation_reads`` (one Spark
task's reads and rules alone), ``storage_growth`` (DAGSTER_HOME and ClickHouse bytes per run, and what
run retention gives back), ``stale_sensor`` (one stale-sensor tick's ClickHouse reads),
``dashboard_queries`` (the Grafana panels over 30 days), ``audit_benchmark`` (one day's failover
audit), ``model_trials`` (failover trials on the pure two-cluster model).

Helpers shared by the benchmarks: ``clusters`` (two scratch KRaft clusters, a mirrored workload of
every topic shape, active consumer groups), ``sync_runs`` (the product's interval cycle and continuous
run, started from a benchmark), ``floor_reads`` (the floor: the same Kafka lookups by a minimal
sequential script), ``process_tree_usage`` (CPU-seconds and peak RSS of a process tree);
``scale_cycles`` is ``scale_curve``'s child process. ``mm2/`` and ``soak/`` hold the parts of those two.
``pictures`` draws the pictures of the benchmarks that print only tables, from their summaries in
bench/results/, and copies every picture to docs/img/results/ for the results pages.
"""

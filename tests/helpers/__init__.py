"""What several test modules share: plain functions and classes, a small module per concern. A test
takes a shared helper from here and a shared fixture from the nearest conftest.py that covers its
users; it never imports another test module (tests/test_layout.py checks that), so a test module
stays free to change without breaking another folder's tests.

  groups.py          a live group member, a group's committed offsets read back, a commit by hand,
                     odd group ids
  pairs.py           a pair of clusters by name: bootstraps, a log end through the admin, sync resources
  records.py         a partition's log end and record values, read back with plain consumers
  one_partition.py   the same reads and writes for one partition, values as text (stale-partition tests)
  topics.py          the partitions and records of the shared fixture topics (tests/conftest.py)
  traffic.py         steady traffic on a source cluster, for the mirrors' recovery tests
  sync_cycles.py     sync cycles run in-process, their checks, the decision lines they log
  outages.py         one sync cycle with a part down, and when a restarted cluster serves again
  dashboards.py      every Grafana panel's SQL run on the rows of real cycles
  fast_forward.py    sync cycles, stale-partition sensor ticks and fast-forward runs in order
  audit.py           sync cycles and the failover audit on one group
  dagster_daemon.py  the real ``dagster-daemon`` in a process of its own
  dagster_ui.py      ``dagster dev`` of bin/up as the browser and clean-stop tests drive it
  fact_reads.py      inputs of the translation-fact reads: client configs, a transactional one-way log
  model_trials.py    hypothesis generators for trials of the two-cluster model
  local_spark.py     local Spark stopped in this process once a test's brokers are gone
  settings_checks.py a setting found by its path, ``dagster definitions validate`` under an environment
  secure_sync.py     the sync principal's rights, settings and topics on the secure clusters
"""

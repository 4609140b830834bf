"""The soak: the real stack and Dagster daemon for an hour at 10,000 group-partitions, with faults
injected (``python -m bench.soak``, or ``bin/soak``). ``run.py`` drives it; its parts: the scaled
load process (``load.py``), the fault injectors (``faults.py``), the process samplers (``procs.py``,
``dagster_procs.py``), the independent no-loss checker (``checker.py``) and the report
(``report.py``). ``rules.py`` is pure (tested in ``tests/bench/test_soak_rules.py``)."""

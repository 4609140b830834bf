"""The soak's parts (``bench/soak.py``): the scaled load process, the fault injectors, the samplers,
the independent no-loss checker and the report. ``rules.py`` is pure (tested in
``tests/bench/test_soak_rules.py``)."""

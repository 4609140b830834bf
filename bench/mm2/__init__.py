"""MirrorMaker 2 for the benchmarks: plain MirrorMaker 2 in dedicated mode (``mirrormaker.py``),
MirrorMaker 2 with the project's transform (``transform_mirror.py``), every group commit read from
``__consumer_offsets`` (``consumer_offsets.py``) and what a failover costs, counted by record
identity (``counting.py``, pure; tested in ``tests/bench/test_mm2_counting.py``)."""

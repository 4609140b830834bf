"""The continuous mode: one long run of back-to-back incremental sync cycles (docs/operating/sync-modes.md).

``revisit_rules.py`` decides which group-partitions a cycle translates again (pure);
``run_state.py`` is what the run remembers and the checkpoint it writes; ``local_translation.py``
translates a small cycle's partitions in a child process; ``loop.py`` runs the cycles and the
checkpoints. It builds on ``sync/`` (the steps of one cycle) and ``monitoring/`` (metric rows).
"""

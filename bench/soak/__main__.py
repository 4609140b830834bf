"""``python -m bench.soak``: the soak (``bench/soak/run.py``)."""

from bench.soak.run import main

raise SystemExit(main())

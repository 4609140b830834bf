"""``python -m offset_pipeline.cli``: the same as the ``offset-pipeline`` command."""

import sys

from offset_pipeline.cli import main

sys.exit(main())

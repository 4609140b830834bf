"""``python -m bench``: the list of benchmarks and how to run them (this package's docstring)."""

import bench

print(bench.__doc__)

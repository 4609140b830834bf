"""The sync tick and fast-forward sensors (added by later issues)."""

all_sensors: list = []

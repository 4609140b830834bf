"""The shape of the shared fixture topics (``mirrored_topic``, ``one_way_topic``, ``outage_topic`` in
tests/conftest.py), for the tests that count their partitions and records."""

#: Partitions of every shared fixture topic.
PARTITIONS = 2
#: Records per partition of ``one_way_topic`` (produced on idc1, copied by the session mirror).
ONE_WAY_RECORDS = 60
#: Records per partition of ``outage_topic`` (produced on the session's idc1, copied once to ``own_idc2``).
OUTAGE_RECORDS = 20

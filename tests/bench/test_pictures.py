"""The results pictures (bench/pictures.py): the printed tables they read, table-driven, and each
picture drawn from a summary into a folder of its own."""

from __future__ import annotations

import shutil

import pytest

from bench import pictures
from devstack.paths import REPO_ROOT

MM2_OUTPUT = """\
system          setting                                  1st all trials no offset  lost dup mean dup p50 dup max  0-dup best dup stale p50 stale max planned lost planned dup
-----------------------------------------------------------------------------------------------------------------------------------------------------------------------------
MirrorMaker 2   checkpoints, defaults                       131s   1446         0     0    648.2     657    1217     0%      0.0     65.8s    122.0s            0        1086
offset_pipeline offset syncs of plain MM2 defaults          137s   1446         0     2      3.7       0      34    58%      0.0      0.0s      3.7s            0           0

by timestamp pattern:
MirrorMaker 2   checkpoints, defaults / increasing          131s    482         0     0    648.1     657    1217     0%      0.0     65.6s    122.0s            0         366
"""

THROUGHPUT_OUTPUT = """\
round 1 none          steady    19087 records/s ( 12.6 s for 80%), whole    21564 records/s, start-up 14.7 s
variant       runs steady rec/s % of none  min..max rec/s whole rec/s us/record +us vs none
none             2        28638    100.0%    19087..38188       30328     34.92        0.00
single           2        30723    107.3%    28186..33260       29630     32.55       -2.37
target: the harness's transforms (both, or single if it configures that) >= 95.0 % of none
none             2        17421    100.0%    12752..22089       18604     57.40        0.00
"""

UPKEEP_OUTPUT = """\
table                                  rows  before MB  B/row  after MB  B/row  smaller
offset_anchors                      132,812       1.10    8.3      0.51    3.8      54%
offset_commits                      260,000       5.66   21.8      2.21    8.5      61%
all tables                                       22.74             8.66             62%
"""


def test_the_mm2_rows_are_the_first_tables_with_lost_and_mean_duplicates():
    assert pictures.compare_mm2_rows(MM2_OUTPUT) == [
        ("MirrorMaker 2\ncheckpoints, defaults", 0, 648.2),
        ("offset_pipeline\noffset syncs of plain MM2 defaults", 2, 3.7),
    ]


def test_the_throughput_rows_are_the_first_medians_table():
    assert pictures.throughput_rows(THROUGHPUT_OUTPUT) == [
        ("none", 28638, 100.0, 19087, 38188),
        ("single", 30723, 107.3, 28186, 33260),
    ]


def test_the_upkeep_rows_are_the_tables_not_the_total():
    assert pictures.upkeep_rows(UPKEEP_OUTPUT) == [("offset_anchors", 8.3, 3.8, 54), ("offset_commits", 21.8, 8.5, 61)]


@pytest.mark.parametrize("name", sorted(pictures.PICTURES))
def test_each_picture_is_drawn_from_its_committed_summary(name, tmp_path):
    folder = tmp_path / name
    shutil.copytree(REPO_ROOT / "bench" / "results" / name, folder)
    for old in folder.glob("*.png"):
        old.unlink()
    drawn = pictures.PICTURES[name](folder)
    assert drawn.parent == folder and drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_picture_is_copied_for_the_docs(tmp_path):
    results = tmp_path / "results"
    for name in ("freshness", "soak"):
        (results / name).mkdir(parents=True)
    (results / "freshness" / "freshness.png").write_bytes(b"a")
    (results / "soak" / "soak.png").write_bytes(b"b")
    copied = pictures.copy_to_docs(results, tmp_path / "img")
    assert sorted(p.name for p in copied) == ["freshness.png", "soak.png"]
    assert (tmp_path / "img" / "soak.png").read_bytes() == b"b"

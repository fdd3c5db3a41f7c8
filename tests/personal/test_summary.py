"""The protocol's summaries across clients, by hand."""

from __future__ import annotations

import math

from fedbench.personal.summary import STATS, summarise


def test_summaries_by_hand() -> None:
    stats = summarise([50.0, 70.0, 90.0, 100.0], [1.0, 1.0, 2.0, 4.0])
    assert list(stats) == list(STATS)
    assert stats["mean"] == 77.5
    assert stats["wmean"] == 87.5  # (50 + 70 + 2*90 + 4*100) / 8
    # deviations -27.5, -7.5, 12.5, 22.5: (756.25 + 56.25 + 156.25 + 506.25) / 4 = 368.75
    assert math.isclose(stats["std"], math.sqrt(368.75), rel_tol=1e-15)
    # position 0.1 * (4 - 1) = 0.3 between the two lowest: 50 + 0.3 * 20
    assert math.isclose(stats["p10"], 56.0, rel_tol=1e-15)


def test_one_client() -> None:
    assert summarise([42.0], [3.0]) == {"mean": 42.0, "wmean": 42.0, "std": 0.0, "p10": 42.0}


def test_order_does_not_matter() -> None:
    a = summarise([10.0, 90.0, 30.0], [5.0, 1.0, 2.0])
    b = summarise([90.0, 30.0, 10.0], [1.0, 2.0, 5.0])
    assert a == b
    assert a["wmean"] == (50.0 + 90.0 + 60.0) / 8

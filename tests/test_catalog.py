"""`fedbench list` and `fedbench blocks` below the command line (fedbench.catalog): one listing
per kind, a typo suggested, an algorithm's card, a model's block layout."""

from __future__ import annotations

import pytest

from fedbench import catalog
from fedbench.catalog import KINDS, algorithm_card, block_view, first_line, listing
from fedbench.errors import FedbenchError
from fedbench.listing import Listing


def test_first_line_joins_the_first_paragraph() -> None:
    assert (
        first_line("A sentence\n    over two lines.\n\n    More.") == "A sentence over two lines."
    )
    assert first_line(None) == ""


def test_every_kind_lists_its_registry() -> None:
    from fedbench.algorithms import ALGORITHMS
    from fedbench.data import DATASETS
    from fedbench.figures import FIGURES
    from fedbench.models import MODELS
    from fedbench.partitions import PARTITIONS

    expected = {"algorithms": ALGORITHMS, "datasets": DATASETS, "models": MODELS}
    expected.update(partitions=PARTITIONS, figures=FIGURES)
    for kind, registry in expected.items():
        shown = listing(kind)
        assert shown.title == kind
        assert [row[0] for row in shown.rows] == list(registry)
        assert all(len(row) == len(shown.columns) for row in shown.rows)
    digits = dict((row[0], row[1]) for row in listing("datasets").rows)["digits"]
    assert digits == first_line(DATASETS.get("digits").__doc__)
    tables = listing("tables")
    assert tables.columns == ["name", "title", "presets", "file"]
    row = next(r for r in tables.rows if r[0] == "table1")
    assert "quick" in row[2].split(", ") and row[3].endswith("table1.yaml")
    assert "blocks" in [r[0] for r in listing("ablations").rows]


def test_a_bad_kind_names_the_closest_and_all_choices() -> None:
    with pytest.raises(FedbenchError) as caught:
        listing("figure")
    assert str(caught.value) == (
        "cannot list 'figure'; did you mean 'figures'? choose tables, ablations, algorithms, "
        "datasets, models, partitions, figures"
    )


def test_a_new_kind_is_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = Listing("colours", ["name"], [["red"]])
    monkeypatch.setitem(KINDS, "colours", lambda: shown)
    assert listing("colours") is shown
    assert catalog.catalog("colours") == [shown]
    with pytest.raises(FedbenchError, match=r"models, partitions, figures, colours$"):
        listing("nope")


def test_a_name_applies_to_algorithms_only() -> None:
    with pytest.raises(FedbenchError, match="a NAME applies to `fedbench list algorithms NAME`"):
        catalog.catalog("models", "cnn")
    header, table = catalog.catalog("algorithms", "fedadamw")
    assert [header, table] == algorithm_card("fedadamw")


def test_algorithm_card_lists_every_hyperparameter() -> None:
    from fedbench.algorithms import ALGORITHMS

    header, table = algorithm_card("fedadamw")
    cls = ALGORITHMS.get("fedadamw")
    assert isinstance(header, str) and isinstance(table, Listing)
    assert header.splitlines()[0] == f"fedadamw: {cls.paper}"
    assert table.columns == ["field", "type", "default", "range", "meaning"]
    fields = [row[0] for row in table.rows]
    assert "name" not in fields
    assert set(fields) == set(cls.Params.model_fields) - {"name"}
    with pytest.raises(FedbenchError, match="fedadamx"):
        algorithm_card("fedadamx")


def test_block_view_counts_blocks_per_tensor() -> None:
    with pytest.raises(FedbenchError, match="--kind bad is not a partition"):
        block_view("cnn", "bad")
    table, summary = block_view("cnn", "tensor")
    assert isinstance(table, Listing) and isinstance(summary, str)
    assert table.title == "cnn: blocks: tensor"
    assert all(row[2] == "1" for row in table.rows)  # one block per tensor
    assert summary.startswith("blocks: tensor  d ")
    assert summary.endswith(f"tensors {len(table.rows)}  B {len(table.rows)}")
    auto_table, auto_summary = block_view("cnn")
    assert auto_table.title.startswith("cnn: blocks: auto -> ")
    assert auto_summary.startswith("blocks: auto -> ")

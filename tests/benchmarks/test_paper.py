"""benchmarks/paper.py: the published cells, and the file it exports being what `optdiv report` reads."""

from __future__ import annotations

import json

import pytest

from optdiv.bench.report import load_paper_numbers


@pytest.fixture(scope="module")
def paper(script):
    return script("paper")


def test_paper_numbers_are_the_published_cells(paper):
    paper_cell = paper.paper_cell
    assert paper_cell("error", "optdivbo", "quake") == (45.05, 1.37)
    assert paper_cell("error", "divbo", "amazon_employee") == (5.15, 0.09)
    assert paper_cell("error", "rs-es", "cpu_small") is None  # the paper's "720.00" typo is left out
    assert paper_cell("error", "bo-es100", "wind") == (14.04, 0.47)
    assert paper_cell("mse", "divbo-b0.01", "bodyfat") == (0.129, 0.070)
    assert paper_cell("mae", "optdivbo", "space_ga") == (0.070, 0.0035)
    assert paper_cell("error", "optdivbo", "no_such_dataset") is None


def test_the_export_is_every_cell_in_the_reports_form(paper, tmp_path, capsys):
    out = tmp_path / "sub" / "paper.json"
    assert paper.main(["export", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["error"]["optdivbo"]["quake"] == [45.05, 1.37]
    assert "cpu_small" not in data["error"]["rs-es"]
    assert load_paper_numbers(out) == paper.PAPER  # every cell, bit for bit, and nothing else
    with pytest.raises(SystemExit):
        paper.main([])

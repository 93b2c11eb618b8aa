"""benchmarks/autogluon_compare.py's table: runs of an earlier hook design stand beside the current ones, and each
optdiv column is paired with AutoGluon's defaults seed by seed."""

from __future__ import annotations


def test_earlier_hook_runs_get_their_own_column_and_pairs_are_counted(script):
    bench = script("autogluon_compare")
    runs = [{"dataset": "quake", "method": "autogluon", "seed": s, "test_error": e} for s, e in enumerate([44, 45, 46])]
    runs += [{"dataset": "quake", "method": "optdivbo", "seed": s, "test_error": e, "hook": bench.HOOK}
             for s, e in enumerate([44, 44, 47])]
    runs += [{"dataset": "quake", "method": "optdivbo", "seed": s, "test_error": e, "hook": "phases"}
             for s, e in enumerate([48, 45])]
    table = bench.summary_table(runs, ["autogluon", "optdivbo"], ["quake"]).splitlines()
    head = [cell.strip() for cell in table[0].strip("|").split("|")]
    row = [cell.strip() for cell in table[2].strip("|").split("|")]
    cells = dict(zip(head, row))
    assert cells["autogluon (this run)"] == "45.00 ± 0.82 (n=3)"
    assert cells["optdivbo (this run)"] == "45.00 ± 1.41 (n=3)"
    assert cells["optdivbo (hook phases) (this run)"] == "46.50 ± 1.50 (n=2)"
    assert cells["optdivbo vs AutoGluon (pairs)"] == "1 / 1 / 1"  # seed 1 lower, seed 0 level, seed 2 higher
    assert cells["optdivbo (hook phases) vs AutoGluon (pairs)"] == "0 / 1 / 1"
    assert cells["OptDivBO AG space (T6)"] == "44.72"
    assert bench.column_of({"method": "divbo"}) == "divbo (hook single-phase)"

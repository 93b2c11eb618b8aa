import pickle

import numpy as np
import pytest

from optdiv.spaces import get_space
from optdiv.spaces.autosklearn_space import VALUE_SHARES
from optdiv.spaces.value_shares import ValueShares, identifier_columns


def _table(rows=600, seed=0):
    """Column 0: an identifier (80 codes, each about 7 times); 1: a real-valued quantity; 2: a near-unique integer;
    3: an integer with only 5 values."""
    rng = np.random.default_rng(seed)
    codes = rng.choice(np.arange(1000, 1080), size=rows)
    return np.column_stack([codes, rng.normal(size=rows), rng.permutation(rows) * 3, rng.integers(0, 5, rows)])


def test_only_whole_number_columns_with_many_repeated_values_qualify():
    X = _table()
    assert identifier_columns(X) == [0]
    assert identifier_columns(X, min_distinct=100) == []  # 80 codes are too few then
    X[5, 0] = np.nan
    assert identifier_columns(X) == []  # a missing value: not an identifier column


def test_shares_come_from_the_fitted_rows_and_an_unseen_value_gets_zero():
    X = _table()
    step = ValueShares().fit(X)
    seen = X[:3].copy()
    unseen = X[:1].copy()
    unseen[0, 0] = 5000
    out = step.transform(np.vstack([seen, unseen]))
    assert out.shape == (4, X.shape[1] + 1)
    np.testing.assert_array_equal(out[:, :-1], np.vstack([seen, unseen]))
    expected = [np.mean(X[:, 0] == value) for value in seen[:, 0]]
    np.testing.assert_allclose(out[:3, -1], expected)
    assert out[3, -1] == 0.0


def test_shares_keep_their_scale_on_more_rows():
    """A member refitted on every training row sees the same feature scale the search scored."""
    X = _table(600)[:, :2]  # the near-unique column would qualify on the doubled rows (each value twice)
    twice = np.vstack([X, X])
    np.testing.assert_allclose(ValueShares().fit(X).transform(X), ValueShares().fit(twice).transform(X))


def test_no_qualifying_column_passes_the_input_through():
    X = _table()[:, 1:]
    step = ValueShares().fit(X)
    assert step.columns_ == []
    np.testing.assert_array_equal(step.transform(X), X)


def test_a_table_of_another_width_is_refused():
    step = ValueShares().fit(_table())
    with pytest.raises(ValueError, match="fitted on 4 columns"):
        step.transform(_table()[:, :3])


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_the_space_switch_adds_the_step_and_is_off_by_default(task):
    sp = get_space("autosklearn", task)
    default = dict(sp.default())
    assert default[VALUE_SHARES] == "off"
    X = _table(400)
    y = (X[:, 0] % 2 == 0).astype(int) if task == "classification" else X[:, 1] + (X[:, 0] % 7)
    off = sp.build(default, 0).fit(X, y)
    on = sp.build(dict(default, **{VALUE_SHARES: "on"}), 0).fit(X, y)
    assert off.steps[0][1] == "passthrough"
    assert on.steps[0][1].columns_ == [0]
    again = pickle.loads(pickle.dumps(on))
    np.testing.assert_array_equal(again.predict(X), on.predict(X))
    assert {c[VALUE_SHARES] for c in sp.sample(200, 3)} == {"off", "on"}


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_the_switch_is_left_out_where_no_column_qualifies_since_it_would_only_copy_models(task):
    from optdiv.spaces.autosklearn_space import for_columns

    full = get_space("autosklearn", task)
    with_identifier = _table(400)
    assert for_columns(full, with_identifier) is full
    narrowed = for_columns(full, with_identifier[:, 1:])  # the identifier column removed: nothing qualifies
    assert narrowed.name == full.name and narrowed.task == task
    assert set(full.hyperparameter_names) - set(narrowed.hyperparameter_names) == {VALUE_SHARES}
    config = dict(narrowed.default())
    assert VALUE_SHARES not in config and narrowed.build(config, 0).steps[0][1] == "passthrough"
    other = get_space("autogluon", task)
    assert for_columns(other, with_identifier[:, 1:]) is other  # only the built-in space has the switch


def test_a_search_sets_the_switch_only_on_data_with_a_qualifying_column():
    import pandas as pd

    from optdiv.data import from_frame, split
    from optdiv.engine.search import search

    X = _table(500, seed=1)
    y = ((X[:, 0] % 3 == 0) ^ (X[:, 1] > 0.5)).astype(int)
    frame = pd.DataFrame(X, columns=["code", "amount", "serial", "level"]).assign(target=y)
    runs = {}
    for name, data in (("with", frame), ("without", frame.drop(columns=["code"]))):
        splits = split(from_frame(data, target="target", name=name), seed=0)
        runs[name] = search(splits, "classification", n_classes=2, method="bo-es", budget=10, seed=0,
                            portfolio="defaults")
    with_switch = [obs.config.get(VALUE_SHARES) for obs in runs["with"].history]
    without_switch = [obs.config.get(VALUE_SHARES) for obs in runs["without"].history]
    assert set(with_switch) <= {"off", "on"} and "off" in with_switch  # the start configurations hold "off"
    assert set(without_switch) == {None}  # not a choice there: the start and every suggestion leave it out
    assert VALUE_SHARES not in runs["without"].space.hyperparameter_names
    assert all(obs.status == "ok" for obs in runs["without"].history)

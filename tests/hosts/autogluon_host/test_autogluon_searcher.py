"""optdiv.integrations.autogluon's searcher inside AutoGluon-Tabular 1.6.3's own HPO loop.

The real HPO runs train LightGBM with few boosting rounds and ``num_cpus=1`` on breast_cancer; the other tests
drive the searcher by hand, without training.
"""

from __future__ import annotations

import numpy as np
import pytest


def _breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    df = load_breast_cancer(as_frame=True).frame
    rest, test = train_test_split(df, test_size=0.2, random_state=0, stratify=df["target"])
    train, val = train_test_split(rest, test_size=0.25, random_state=1, stratify=rest["target"])
    return train, val, test


def _gbm_space():
    from autogluon.common import space

    return {"GBM": {"num_boost_round": 40, "num_leaves": space.Int(4, 64, default=31),
                    "learning_rate": space.Real(0.01, 0.3, default=0.1, log=True)}}


@pytest.mark.timeout(600)
def test_searcher_inside_autogluon_hpo_gets_predictions_for_every_trial(tmp_path):
    from autogluon.tabular import TabularPredictor

    from optdiv.integrations import autogluon as oag

    assert oag.register_searchers() == ["optdivbo", "divbo"]
    train, val, test = _breast_cancer()
    records = []  # list.append survives AutoGluon's deep copy of hyperparameter_tune_kwargs
    predictor = TabularPredictor(label="target", path=str(tmp_path / "ag"), verbosity=0).fit(
        train, tuning_data=val, time_limit=120, hyperparameters=_gbm_space(), num_cpus=1,
        hyperparameter_tune_kwargs={"scheduler": "local", "searcher": "optdivbo", "num_trials": 6,
                                    "search_options": {"n_initial": 3, "callback": records.append, "seed": 1}},
    )

    assert [r["trial"] for r in records] == list(range(6))
    assert all(r["has_predictions"] for r in records)
    assert len({(r["config"]["num_leaves"], r["config"]["learning_rate"]) for r in records}) == 6
    assert all(r["weight"] is None for r in records[:3]) and all(r["weight"] is not None for r in records[4:])
    trial_models = [m for m in predictor.model_names() if m.startswith("LightGBM/T")]
    assert sorted(trial_models) == ["LightGBM/T%d" % i for i in range(1, 7)]
    assert (predictor.predict(test) == test["target"]).mean() > 0.9


@pytest.mark.timeout(600)
def test_searcher_reads_out_of_fold_predictions_of_bagged_trials(tmp_path):
    from autogluon.tabular import TabularPredictor

    from optdiv.integrations import autogluon as oag

    oag.register_searchers()
    train, _, test = _breast_cancer()
    records = []
    predictor = TabularPredictor(label="target", path=str(tmp_path / "ag"), verbosity=0).fit(
        train, time_limit=150, hyperparameters=_gbm_space(), num_bag_folds=2, num_cpus=1,
        hyperparameter_tune_kwargs={"scheduler": "local", "searcher": "divbo", "num_trials": 5,
                                    "search_options": {"n_initial": 2, "callback": records.append}},
    )

    assert [r["trial"] for r in records] == list(range(5))
    assert all(r["has_predictions"] for r in records), records
    assert any(r["weight"] is not None for r in records[3:])  # the selector ranked the later trials
    assert (predictor.predict(test) == test["target"]).mean() > 0.9
    # what the searcher read: out-of-fold predictions of every trial, on the training rows, scored as AutoGluon did
    searcher = records[0]["searcher"]
    y = np.asarray(searcher._y_val)
    assert y.shape == (len(train),)
    for obs in searcher.observations:
        assert obs["pred"].shape == (len(train), 2)
        assert obs["reward"] == pytest.approx(np.mean(obs["pred"].argmax(1) == y))  # accuracy, out of fold


def _searcher_with_history(selector_options):
    """A searcher after six trials whose predictions make diversity matter: four good models that err on the
    same rows and two weaker ones that err elsewhere."""
    from autogluon.common import space

    from optdiv.integrations import autogluon as oag

    ss = {"lr": space.Real(1e-3, 1e-1, default=1e-2, log=True), "depth": space.Int(2, 10, default=4),
          "kind": space.Categorical("a", "b", "c"), "fixed": 7}
    searcher = oag.OptDivSearcher(search_space=ss, reward_attribute="reward", n_initial=2, n_candidates=300, seed=0,
                                  selector_options=selector_options)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 80)
    searcher._y_val = y
    history = [({"lr": 0.05, "depth": 9, "kind": "a"}, 0.95, range(0, 4)),
               ({"lr": 0.04, "depth": 8, "kind": "a"}, 0.94, range(0, 5)),
               ({"lr": 0.06, "depth": 9, "kind": "b"}, 0.94, range(1, 6)),
               ({"lr": 0.03, "depth": 10, "kind": "a"}, 0.93, range(0, 6)),
               ({"lr": 0.002, "depth": 2, "kind": "c"}, 0.85, range(40, 52)),
               ({"lr": 0.003, "depth": 3, "kind": "c"}, 0.84, range(60, 73))]
    for config, reward, wrong in history:
        config = dict(config, fixed=7)
        searcher.update(config, reward=reward)
        hit = np.ones(len(y), dtype=bool)
        hit[list(wrong)] = False
        p = np.where(hit, 0.9, 0.1)
        proba_of_1 = np.where(y == 1, p, 1 - p)
        searcher._observed[-1]["pred"] = np.stack([1 - proba_of_1, proba_of_1], axis=1).astype(np.float32)
    return searcher


def test_the_selector_changes_a_suggestion():
    """Same history, same candidates: with the diversity weight forced to 0 the searcher takes EI's choice;
    with a large weight the DiversityAwareSelector takes another one."""
    plain = _searcher_with_history({"fixed_weight": 0.0})
    diverse = _searcher_with_history({"fixed_weight": 50.0})
    by_ei, by_diversity = plain.get_config(), diverse.get_config()

    assert plain.choices[-1]["selector_changed"] is False and plain.choices[-1]["ei_choice"] == by_ei
    assert diverse.choices[-1]["ei_choice"] == by_ei  # both saw the same candidates and the same EI
    assert by_diversity != by_ei
    assert diverse.choices[-1]["selector_changed"] is True


def test_searcher_encodes_with_the_engines_config_encoder():
    """AutoGluon's space becomes a ConfigSpace space; the engine's ConfigEncoder does the [0, 1] encoding."""
    from autogluon.common import space

    from optdiv.integrations import autogluon as oag
    from optdiv.spaces.encoding import ConfigEncoder

    ss = {"lr": space.Real(1e-3, 1e-1, default=1e-2, log=True), "depth": space.Int(2, 10, default=4),
          "kind": space.Categorical("a", "b", "c"), "flag": space.Bool(), "fixed": 7}
    searcher = oag.OptDivSearcher(search_space=ss, reward_attribute="reward")
    assert isinstance(searcher.encoder, ConfigEncoder)
    assert searcher.encoder.names == ["lr", "depth", "kind", "flag"]  # fixed values are not searched
    x = searcher.encode([{"lr": 1e-2, "depth": 2, "kind": "b", "flag": 1, "fixed": 7},
                         {"lr": 1e-1, "depth": 10, "kind": "c", "flag": 0, "fixed": 7}])
    assert x.shape == (2, 4) and np.all((x >= 0) & (x <= 1))
    np.testing.assert_allclose(x[:, [0, 2]], [[0.5, 0.5], [1.0, 1.0]])  # log scale; index / (k - 1)
    assert x[0, 1] < 0.1 and x[1, 1] > 0.9 and x[0, 3] > x[1, 3]


def test_searcher_fails_loudly_on_a_changed_host(monkeypatch):
    import importlib
    from types import SimpleNamespace

    from autogluon.common import space

    from optdiv.integrations import autogluon as oag

    oag.check_host(searcher=True)
    factory = importlib.import_module("autogluon.core.searcher.searcher_factory")
    monkeypatch.delattr(factory, "SEARCHER_CONFIGS")
    with pytest.raises(oag.HostVersionError, match=r"1\.6\.3[\s\S]*SEARCHER_CONFIGS"):
        oag.register_searchers()
    monkeypatch.undo()

    # a scheduler that no longer tells the searcher where the trial models are
    searcher = oag.OptDivSearcher(search_space={"x": space.Real(0.0, 1.0)}, reward_attribute="reward")
    with pytest.raises(oag.HostVersionError, match="train_fn_kwargs.*cannot find the trial models"):
        searcher.configure_scheduler(SimpleNamespace(train_fn_kwargs={"model_cls": object}))

"""Warm-start portfolios: the greedy choice, the file format, and that a search evaluates them first."""

import json

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.data import from_frame, split
from optdiv.engine.search import search
from optdiv.spaces import SearchSpace
from optdiv.spaces.candidates import LibraryCandidates, SpaceCandidates
from optdiv.strategies.model_based import Optimizer
from optdiv.spaces.portfolio import (greedy_portfolio, normalized_regret, portfolio_path, read_portfolio,
                                   resolve_portfolio, write_portfolio)

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}
LINEAR = {"algorithm": "linear", "C": 0.5, "task": "classification"}
TREE = {"algorithm": "tree", "depth": 4, "leaf": 3, "task": "classification"}


def test_normalized_regret_scales_each_dataset_by_its_median():
    losses = np.array([[0.10, 5.0], [0.20, 6.0], [0.30, 9.0], [np.inf, 7.0], [0.15, np.nan]])
    regret = normalized_regret(losses)
    # dataset 0: best 0.10, median of the finite 0.175 -> scale 0.075; dataset 1: best 5, median 6.5
    assert regret[0, 0] == 0.0 and regret[0, 1] == 0.0
    assert regret[4, 0] == pytest.approx(0.05 / 0.075)
    assert regret[1, 0] == 1.0  # 0.10 / 0.075 above the median's regret: capped
    assert regret[1, 1] == pytest.approx(1.0 / 1.5)
    assert regret[2, 0] == 1.0  # capped
    assert regret[3, 0] == 1.0 and regret[4, 1] == 1.0  # failed / missing


def test_greedy_portfolio_covers_every_dataset_and_respects_the_mask():
    # row 0 is fair everywhere, row 1 is best on dataset A only, row 2 best on B only, row 3 best on both but masked
    losses = np.array([[0.2, 0.2, 0.2], [0.1, 0.5, 0.3], [0.5, 0.1, 0.3], [0.05, 0.05, 0.05], [0.6, 0.6, 0.6]])
    allowed = np.array([True, True, True, False, True])
    picks = greedy_portfolio(losses, 3, allowed=allowed)
    assert 3 not in picks
    assert set(picks) == {0, 1, 2}
    assert greedy_portfolio(losses, 2)[0] == 3  # unmasked, the all-round best comes first


def test_greedy_portfolio_caps_each_algorithm():
    # three near-identical strong rows of one algorithm, one weaker row of another
    losses = np.array([[0.10, 0.10], [0.11, 0.10], [0.10, 0.11], [0.30, 0.30], [0.5, 0.5], [0.6, 0.6]])
    groups = ["gbm", "gbm", "gbm", "lda", "knn", "knn"]
    uncapped = greedy_portfolio(losses, 3)
    assert uncapped == [0, 1, 2]
    capped = greedy_portfolio(losses, 3, groups=groups, per_group=2)
    assert capped[:2] == [0, 1] and capped[2] == 3


def test_portfolio_files_round_trip_and_refuse_the_wrong_task(tmp_path):
    path = tmp_path / "p.json"
    write_portfolio(path, [LINEAR, TREE], space="tiny", task="classification", datasets=["a", "b"])
    assert read_portfolio(path, "classification") == [LINEAR, TREE]
    assert json.loads(path.read_text())["datasets"] == ["a", "b"]
    assert resolve_portfolio(str(path), "tiny", "classification") == [LINEAR, TREE]
    with pytest.raises(ValueError, match="not regression"):
        read_portfolio(path, "regression")
    assert resolve_portfolio(None, "tiny", "classification") is None
    assert resolve_portfolio("none", "tiny", "classification") is None
    with pytest.raises(ValueError, match="no built-in portfolio"):
        resolve_portfolio("builtin", "tiny", "classification")
    with pytest.raises(FileNotFoundError):
        resolve_portfolio(str(tmp_path / "missing.json"), "tiny", "classification")


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_shipped_portfolios_are_valid_configurations_of_their_space(task):
    from optdiv.spaces import get_space

    path = portfolio_path("autosklearn", task)
    if not path.exists():
        pytest.skip(f"no shipped portfolio for {task} yet")
    space = get_space("autosklearn", task)
    configs = read_portfolio(path, task)
    assert len(configs) >= 8
    for config in configs:
        assert space.validate(config) == config


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_library_defaults_portfolio_is_each_strong_algorithm_at_its_librarys_defaults(task):
    from optdiv.spaces import get_space
    from optdiv.spaces.portfolio import LIBRARY_DEFAULTS

    space = get_space("autosklearn", task)
    configs = resolve_portfolio("defaults", "autosklearn", task)
    role = "classifier" if task == "classification" else "regressor"
    expected = [algorithm for algorithm, _ in LIBRARY_DEFAULTS["autosklearn", task]]
    assert [c[f"{role}:__choice__"] for c in configs] == expected
    assert expected[:4] == ["lightgbm", "extra_trees", "random_forest", "gradient_boosting"]
    for config in configs:
        assert space.validate(config) == config  # legal, and no inactive hyperparameter left in
        assert config["feature_preprocessor:__choice__"] == "no_preprocessing"
    lightgbm, knn = configs[0], configs[expected.index("k_nearest_neighbors")]
    assert (lightgbm[f"{role}:lightgbm:num_leaves"], lightgbm[f"{role}:lightgbm:n_estimators"]) == (31, 100)
    assert knn[f"{role}:k_nearest_neighbors:n_neighbors"] == 5
    forest = configs[expected.index("random_forest")]  # untouched hyperparameters keep the space's defaults
    default = space.default()
    assert default[f"{role}:__choice__"] == "random_forest" and forest == default
    with pytest.raises(ValueError, match="no library-defaults portfolio"):
        resolve_portfolio("defaults", "tiny", task)


def test_optimizer_suggests_the_portfolio_first_in_order_skipping_invalid_entries():
    space = tiny_space("classification")
    bad = {"algorithm": "tree", "depth": 99, "leaf": 3, "task": "classification"}  # depth out of range
    optimizer = Optimizer(space, "bo", "error", seed=0, initial=[TREE, bad, LINEAR], **FAST)

    class Seen:
        def __init__(self, config):
            self.config, self.status, self.val_loss, self.val_pred, self.index = config, "ok", 0.1, None, 0

    first = optimizer.suggest([])
    assert first.config == TREE and first.info["strategy"] == "portfolio"
    second = optimizer.suggest([Seen(TREE)])
    assert second.config == LINEAR  # the invalid entry is skipped
    assert SpaceCandidates(space).offer(bad) is None


def test_library_candidates_offer_only_their_members():
    class Library:
        configs = [LINEAR]
        algorithms = ["linear"]
    source = LibraryCandidates(Library())
    assert source.offer(dict(LINEAR)) == LINEAR
    assert source.offer(TREE) is None


def test_search_evaluates_the_portfolio_first_and_bad_methods_are_refused(tmp_path):
    frame = load_breast_cancer(as_frame=True).frame.sample(200, random_state=0)
    splits = split(from_frame(frame, target="target", name="bc"), seed=0)
    space = tiny_space("classification")
    result = search(splits, "classification", n_classes=2, method="optdivbo", space=space, budget=4, seed=0,
                    optimizer_options=FAST, portfolio=[TREE, LINEAR])
    assert [obs.config for obs in result.history[:2]] == [TREE, LINEAR]
    random_start = search(splits, "classification", n_classes=2, method="optdivbo", space=space, budget=2, seed=0,
                          optimizer_options=FAST)
    assert [obs.config for obs in random_start.history] != [TREE, LINEAR]
    with pytest.raises(ValueError, match="no initial design"):
        search(splits, "classification", n_classes=2, method="rb-es", space=space, budget=2, portfolio=[TREE])


def test_a_start_only_algorithm_is_evaluated_from_the_start_list_and_never_suggested():
    frame = load_breast_cancer(as_frame=True).frame.sample(200, random_state=0)
    splits = split(from_frame(frame, target="target", name="bc"), seed=0)
    tiny = tiny_space("classification")
    space = SearchSpace(tiny.name, tiny.task, tiny.configspace, tiny._builder, algorithm_key="algorithm",
                        start_only=["tree"])
    assert space.searched_algorithms == ["linear"] and SpaceCandidates(space).algorithms() == ["linear"]
    result = search(splits, "classification", n_classes=2, method="optdivbo", space=space, budget=14, seed=0,
                    optimizer_options=FAST, portfolio=[TREE, LINEAR])
    algorithms = [obs.algorithm for obs in result.history]
    assert len(algorithms) == 14 and algorithms[0] == "tree" and algorithms.count("tree") == 1
    # the unrestricted space, same seed: the search itself turns to trees (it would tune them)
    free = search(splits, "classification", n_classes=2, method="optdivbo", space=tiny, budget=14, seed=0,
                  optimizer_options=FAST, portfolio=[TREE, LINEAR])
    assert [obs.algorithm for obs in free.history].count("tree") > 1
    with pytest.raises(ValueError, match="start_only names algorithms the space lacks: forest"):
        SearchSpace(tiny.name, tiny.task, tiny.configspace, tiny._builder, algorithm_key="algorithm",
                    start_only=["forest"])


def test_auto_portfolio_is_the_library_defaults_where_they_exist_and_a_random_start_elsewhere():
    for task in ("classification", "regression"):
        assert resolve_portfolio("auto", "autosklearn", task) == resolve_portfolio("defaults", "autosklearn", task)
        assert resolve_portfolio("auto", "tiny", task) is None  # no defaults known for a custom space
    frame = load_breast_cancer(as_frame=True).frame.sample(200, random_state=0)
    splits = split(from_frame(frame, target="target", name="bc"), seed=0)
    space = tiny_space("classification")
    # methods without an initial design run as without a portfolio (rb-es refuses an explicit one, above)
    plain = search(splits, "classification", n_classes=2, method="rb-es", space=space, budget=2, seed=0)
    auto = search(splits, "classification", n_classes=2, method="rb-es", space=space, budget=2, seed=0,
                  portfolio="auto")
    assert [obs.config for obs in auto.history] == [obs.config for obs in plain.history]


def test_the_estimators_and_the_cli_start_from_the_library_defaults():
    from optdiv.cli import build_parser, run_config_from_args
    from optdiv.sklearn import OptDivClassifier

    args = build_parser().parse_args(["run", "--data", "sklearn:breast_cancer"])
    assert run_config_from_args(args).portfolio == "auto"
    frame = load_breast_cancer(as_frame=True).frame.sample(200, random_state=0)
    model = OptDivClassifier(budget=3, seed=0).fit(frame.drop(columns="target"), frame["target"])
    assert [obs.algorithm for obs in model.result_.history] == ["lightgbm", "extra_trees", "random_forest"]

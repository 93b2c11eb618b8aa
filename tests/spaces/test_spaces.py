"""Search spaces: structure, encoding, sampling, neighbours, and that every algorithm really fits.

Runs on ConfigSpace 0.4.21 / 0.6.1 / 1.x and scikit-learn 0.24 .. 1.9.
"""

import pickle
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from optdiv.spaces import cs_compat as C
from optdiv.spaces import KNOWN_SPACES, SearchSpace, get_space
from optdiv.spaces.autogluon_space import OPTIONAL, autogluon_space, available_algorithms
from optdiv.spaces.autosklearn_space import (
    CLASSIFIERS,
    PREPROCESSORS_CLASSIFICATION,
    PREPROCESSORS_REGRESSION,
    REGRESSORS,
    RESCALERS,
)

TASKS = ("classification", "regression")
_SPACES = {}


def space(name, task):
    """Spaces are immutable in use; build each once per test session."""
    key = (name, task)
    if key not in _SPACES:
        _SPACES[key] = get_space(name, task)
    return _SPACES[key]


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import load_breast_cancer, load_diabetes

    rng = np.random.RandomState(0)
    out = {}
    for task, loader in (("classification", load_breast_cancer), ("regression", load_diabetes)):
        X, y = loader(return_X_y=True)
        idx = rng.permutation(len(X))[:160]
        X, y = X[idx].astype(np.float64), y[idx]
        out[task] = (X[:120], y[:120], X[120:])
    return out


def fit_predict(estimator, task, X, y, X_test):
    # one thread: OpenMP models (HistGradientBoosting) slow down 10-50x when cores are few and shared
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        estimator.fit(X, y)
        if task == "classification" and hasattr(estimator, "predict_proba"):
            return estimator.predict_proba(X_test), True
        return estimator.predict(X_test), False


def check_predictions(pred, is_proba, task, y, n_test):
    pred = np.asarray(pred, dtype=np.float64)
    assert np.all(np.isfinite(pred))
    if is_proba:
        assert pred.shape == (n_test, len(np.unique(y)))
        np.testing.assert_allclose(pred.sum(axis=1), 1.0, atol=1e-6)
    else:
        assert pred.shape == (n_test,)
        if task == "classification":
            assert set(np.unique(pred)) <= set(np.unique(y))


def replace_choice(sp, config, group, choice, children=None):
    """``config`` with ``group`` switched to ``choice`` (old children removed, new ones given)."""
    out = {k: v for k, v in config.items() if not k.startswith(group + ":")}
    out[group + ":__choice__"] = choice
    out.update(children or {})
    return sp.validate(out)


def configs_with(sp, key, value, k, seed=11, pool=400):
    pool = sp.sample(pool, seed)
    picked = [c for c in pool if c.get(key) == value][:k]
    assert picked, "no sampled configuration with %s=%s" % (key, value)
    return picked


# --------------------------------------------------------------------------- structure
def test_autosklearn_hyperparameter_counts():
    cls, reg = space("autosklearn", "classification"), space("autosklearn", "regression")
    # 4 choices + 49 classifier + 4 rescaler + 45 preprocessor hyperparameters (the paper's 102, see module
    # docstring) + the value-shares switch
    assert cls.n_hyperparameters == 103
    # 3 choices + 37 regressor + 4 rescaler + 37 preprocessor hyperparameters + the switch
    assert reg.n_hyperparameters == 82
    assert len(cls.encode([cls.default()])[0]) == 103
    assert cls.algorithms == list(CLASSIFIERS) and len(CLASSIFIERS) == 11
    assert reg.algorithms == list(REGRESSORS) and len(REGRESSORS) == 8


@pytest.mark.parametrize("task", TASKS)
def test_the_perceptron_space_is_the_autosklearn_space_plus_one_model(task):
    from optdiv.spaces.autosklearn_space import for_columns
    from optdiv.spaces.portfolio import library_defaults

    base, with_mlp = space("autosklearn", task), space("autosklearn+mlp", task)
    assert with_mlp.name == "autosklearn+mlp"
    assert with_mlp.algorithms == base.algorithms + ["mlp"]
    own = [n for n in with_mlp.hyperparameter_names if ":mlp:" in n]
    assert len(own) == 6 and sorted(set(with_mlp.hyperparameter_names) - set(own)) == sorted(base.hyperparameter_names)
    start = library_defaults("autosklearn+mlp", task)
    assert [with_mlp.algorithm_of(c) for c in start] == [base.algorithm_of(c) for c in
                                                         library_defaults("autosklearn", task)] + ["mlp"]
    net = with_mlp.build(start[-1], seed=0)
    model = net.steps[-1][1]
    if task == "regression":  # the network learns the standardised target
        model = model.regressor
    assert model.hidden_layer_sizes == (100,) and model.activation == "relu" and model.alpha == 1e-4
    # leaving the value-shares switch out (no qualifying column) keeps the perceptron
    narrowed = for_columns(with_mlp, np.zeros((5, 2)))
    assert "mlp" in narrowed.algorithms and len(narrowed.hyperparameter_names) == len(with_mlp.hyperparameter_names) - 1


@pytest.mark.parametrize("task", TASKS)
def test_the_default_perceptron_space_starts_the_perceptron_and_never_searches_it(task):
    from optdiv.spaces.autosklearn_space import autosklearn_space, for_columns
    from optdiv.spaces.portfolio import library_defaults

    base, with_mlp = space("autosklearn", task), space("autosklearn+mlp", task)
    fixed = space("autosklearn+defaultmlp", task)
    assert fixed.name == "autosklearn+defaultmlp" and fixed.algorithms == with_mlp.algorithms
    assert fixed.hyperparameter_names == with_mlp.hyperparameter_names
    assert fixed.start_only == {"mlp"} and with_mlp.start_only == frozenset() and base.start_only == frozenset()
    assert fixed.searched_algorithms == base.algorithms and with_mlp.searched_algorithms == with_mlp.algorithms
    start = library_defaults("autosklearn+defaultmlp", task)
    assert start == library_defaults("autosklearn+mlp", task) and fixed.algorithm_of(start[-1]) == "mlp"
    narrowed = for_columns(fixed, np.zeros((5, 2)))  # no qualifying column: the switch goes, the rule stays
    assert narrowed.start_only == {"mlp"} and narrowed.name == fixed.name
    with pytest.raises(ValueError, match="mlp must be"):
        autosklearn_space(task, mlp="tuned")


@pytest.mark.parametrize("task", TASKS)
def test_the_default_catboost_space_starts_catboost_and_never_searches_it(task):
    from optdiv.spaces.autosklearn_space import autosklearn_space, for_columns
    from optdiv.spaces.portfolio import library_defaults

    base, fixed = space("autosklearn", task), space("autosklearn+defaultcatboost", task)
    assert fixed.name == "autosklearn+defaultcatboost" and fixed.algorithms == base.algorithms + ["catboost"]
    assert fixed.hyperparameter_names == base.hyperparameter_names  # CatBoost brings no hyperparameter to search
    assert fixed.start_only == {"catboost"} and fixed.searched_algorithms == base.algorithms
    start = library_defaults("autosklearn+defaultcatboost", task)
    assert start[:-1] == library_defaults("autosklearn", task) and fixed.algorithm_of(start[-1]) == "catboost"
    assert {fixed.algorithm_of(c) for c in fixed.sample(300, 1)} == set(fixed.algorithms)  # the space holds it
    narrowed = for_columns(fixed, np.zeros((5, 2)))  # no qualifying column: the switch goes, the rule stays
    assert narrowed.start_only == {"catboost"} and narrowed.name == fixed.name
    with pytest.raises(ValueError, match="both the perceptron and CatBoost"):
        autosklearn_space(task, mlp="default", catboost=True)


@pytest.mark.parametrize("task", TASKS)
def test_the_default_catboost_member_fits_on_one_thread_and_takes_the_class_weights(task, data):
    pytest.importorskip("catboost", reason="the catboost model needs the catboost package (optdiv[catboost])")
    from optdiv.evaluation.threads import set_model_threads
    from optdiv.spaces.portfolio import library_defaults

    fixed = space("autosklearn+defaultcatboost", task)
    config = library_defaults(fixed.name, task)[-1]
    X, y, X_test = data[task]
    pipeline = fixed.build(config, seed=3)
    model = pipeline.steps[-1][1]
    assert type(model).__module__.startswith("catboost")
    assert model.get_params()["iterations"] == 500 and model.get_params()["thread_count"] == 1
    assert "learning_rate" not in model.get_params()  # CatBoost picks its own rate for the rows it gets
    predictions = pipeline.fit(X, y).predict(X_test)
    assert predictions.shape == (len(X_test),)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(pipeline)).predict(X_test), predictions)
    assert set_model_threads(fixed.build(config, seed=3), 2).steps[-1][1].get_params()["thread_count"] == 2
    if task == "classification":
        weighted = fixed.build({**config, "balancing:strategy": "weighting"}, seed=3).steps[-1][1]
        assert weighted.get_params()["auto_class_weights"] == "Balanced"
        assert model.get_params().get("auto_class_weights") is None


def test_the_catboost_model_without_its_package_says_what_to_install(monkeypatch):
    import sys

    from optdiv.spaces.portfolio import library_defaults

    monkeypatch.setitem(sys.modules, "catboost", None)  # as if not installed
    fixed = space("autosklearn+defaultcatboost", "classification")
    with pytest.raises(ImportError, match="pip install catboost"):
        fixed.build(library_defaults(fixed.name, "classification")[-1], seed=0)


def test_autogluon_hyperparameter_counts():
    per_algorithm = {"lightgbm": 4, "catboost": 3, "xgboost": 8, "random_forest": 3, "extra_trees": 3,
                     "k_nearest_neighbors": 3, "linear": 2}
    for task in TASKS:
        sp = space("autogluon", task)
        assert sp.algorithms == available_algorithms()
        assert sp.n_hyperparameters == 1 + sum(per_algorithm[a] for a in sp.algorithms)
        for required in ("lightgbm", "random_forest", "extra_trees", "k_nearest_neighbors", "linear"):
            assert required in sp.algorithms


@pytest.mark.parametrize("name,task", [(n, t) for n in KNOWN_SPACES for t in TASKS])
def test_every_choice_is_reachable_by_sampling(name, task):
    sp = space(name, task)
    pool = sp.sample(600, 3)
    assert {sp.algorithm_of(c) for c in pool} == set(sp.algorithms)
    if name == "autosklearn":
        pres = PREPROCESSORS_CLASSIFICATION if task == "classification" else PREPROCESSORS_REGRESSION
        assert {c["feature_preprocessor:__choice__"] for c in pool} == set(pres)
        assert {c["rescaling:__choice__"] for c in pool} == set(RESCALERS)
        if task == "classification":
            assert {c["balancing:strategy"] for c in pool} == {"none", "weighting"}


def test_sparse_embedding_is_forbidden_with_dense_only_models():
    sp = space("autosklearn", "classification")
    for c in sp.sample(600, 5):
        if c["feature_preprocessor:__choice__"] == "random_trees_embedding":
            assert c["classifier:__choice__"] not in ("lda", "qda", "gradient_boosting")
    bad = replace_choice(sp, sp.default(), "feature_preprocessor", "no_preprocessing")
    bad = {k: v for k, v in bad.items() if not k.startswith("classifier:")}
    bad.update({"classifier:__choice__": "qda", "classifier:qda:reg_param": 0.1,
                "feature_preprocessor:__choice__": "random_trees_embedding",
                "feature_preprocessor:random_trees_embedding:n_estimators": 10,
                "feature_preprocessor:random_trees_embedding:max_depth": 3,
                "feature_preprocessor:random_trees_embedding:min_samples_split": 2,
                "feature_preprocessor:random_trees_embedding:min_samples_leaf": 1})
    with pytest.raises(ValueError):
        sp.validate(bad)
    with pytest.raises(ValueError):
        sp.build(bad, 0)


# --------------------------------------------------------------------------- fitting
_ALGORITHM_CASES = ([("autosklearn", "classification", a) for a in CLASSIFIERS]
                    + [("autosklearn", "regression", a) for a in REGRESSORS]
                    + [("autosklearn+mlp", t, "mlp") for t in TASKS]
                    + [("autogluon", t, a) for t in TASKS for a in available_algorithms()])


@pytest.mark.parametrize("name,task,algorithm", _ALGORITHM_CASES)
def test_each_algorithm_builds_fits_and_predicts(name, task, algorithm, data):
    sp = space(name, task)
    X, y, X_test = data[task]
    key = sp.algorithm_key
    configs = configs_with(sp, key, algorithm, k=1 if algorithm == "catboost" else 2)  # catboost is slow
    if name.startswith("autosklearn"):
        # the model's own hyperparameters vary; rescaler and preprocessor are fixed and cheap here
        # (preprocessors have their own test below)
        configs = [replace_choice(sp, replace_choice(sp, c, "feature_preprocessor", "no_preprocessing"),
                                  "rescaling", "standardize") for c in configs]
    for config in configs:
        assert sp.algorithm_of(config) == algorithm
        estimator = sp.build(config, seed=0)
        assert hasattr(estimator, "fit") and hasattr(estimator, "predict")
        pred, is_proba = fit_predict(estimator, task, X, y, X_test)
        check_predictions(pred, is_proba, task, y, len(X_test))


_CHEAP_MODEL = {
    "classification": ("classifier", "k_nearest_neighbors",
                       {"classifier:k_nearest_neighbors:n_neighbors": 5,
                        "classifier:k_nearest_neighbors:weights": "distance"}),
    "regression": ("regressor", "ridge", {"regressor:ridge:alpha": 1.0, "regressor:ridge:tol": 1e-3}),
}


@pytest.mark.parametrize("task,preprocessor",
                         [("classification", p) for p in PREPROCESSORS_CLASSIFICATION]
                         + [("regression", p) for p in PREPROCESSORS_REGRESSION])
def test_each_feature_preprocessor_fits(task, preprocessor, data):
    sp = space("autosklearn", task)
    X, y, X_test = data[task]
    group, model, children = _CHEAP_MODEL[task]
    pool = [c for c in sp.sample(600, 17) if c["feature_preprocessor:__choice__"] == preprocessor][:2]
    assert pool
    for config in pool:
        config = replace_choice(sp, config, group, model, children)
        pred, is_proba = fit_predict(sp.build(config, seed=1), task, X, y, X_test)
        check_predictions(pred, is_proba, task, y, len(X_test))


@pytest.mark.parametrize("rescaler", RESCALERS)
def test_each_rescaler_fits(rescaler, data):
    sp = space("autosklearn", "classification")
    X, y, X_test = data["classification"]
    for config in configs_with(sp, "rescaling:__choice__", rescaler, k=2, seed=23):
        config = replace_choice(sp, config, "feature_preprocessor", "no_preprocessing")
        config = replace_choice(sp, config, "classifier", *_CHEAP_MODEL["classification"][1:])
        pred, is_proba = fit_predict(sp.build(config, seed=2), "classification", X, y, X_test)
        check_predictions(pred, is_proba, "classification", y, len(X_test))


def test_balancing_sets_class_weights():
    sp = space("autosklearn", "classification")
    config = sp.default()
    assert config["classifier:__choice__"] == "random_forest"
    weighted = dict(config, **{"balancing:strategy": "weighting"})
    assert sp.build(weighted, 0).steps[-1][1].class_weight == "balanced"
    assert sp.build(config, 0).steps[-1][1].class_weight is None


def test_build_is_seeded_and_pickles(data):
    sp = space("autosklearn", "classification")
    X, y, X_test = data["classification"]
    config = configs_with(sp, "classifier:__choice__", "extra_trees", k=1)[0]
    config = replace_choice(sp, config, "feature_preprocessor", "no_preprocessing")
    a, _ = fit_predict(sp.build(config, seed=5), "classification", X, y, X_test)
    b, _ = fit_predict(sp.build(config, seed=5), "classification", X, y, X_test)
    np.testing.assert_array_equal(a, b)
    clone = pickle.loads(pickle.dumps(sp))
    assert clone.n_hyperparameters == sp.n_hyperparameters
    with threadpool_limits(1):
        fitted = sp.build(config, seed=5).fit(X, y)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted)).predict_proba(X_test), a)


# --------------------------------------------------------------------------- encoding, sampling
@pytest.mark.parametrize("name,task", [(n, t) for n in KNOWN_SPACES for t in TASKS])
def test_encode_range_width_and_inactive(name, task):
    sp = space(name, task)
    configs = sp.sample(50, 1) + [sp.default()]
    E = sp.encode(configs)
    assert E.shape == (len(configs), sp.n_hyperparameters)
    assert E.dtype == np.float64
    active = E != -1.0
    assert np.all((E[active] >= 0.0) & (E[active] <= 1.0))
    for row, config in zip(E, configs):
        expected = np.array([n in config for n in sp.hyperparameter_names])
        np.testing.assert_array_equal(row != -1.0, expected)
    # dicts and ConfigSpace Configurations encode identically; one dict works too
    as_cs = [sp.to_configuration(c) for c in configs[:5]]
    np.testing.assert_array_equal(sp.encode(as_cs), E[:5])
    np.testing.assert_array_equal(sp.encode(configs[0]), E[:1])


def test_encode_categorical_and_log_scale():
    sp = space("autosklearn", "classification")
    cfg = sp.default()
    col = sp.hyperparameter_names.index("classifier:__choice__")
    choices = sp.algorithms
    for i, algorithm in enumerate(choices):
        value = sp.encode([{**cfg, "classifier:__choice__": algorithm}])[0, col]
        assert value == pytest.approx(i / (len(choices) - 1))
    lr = sp.hyperparameter_names.index("classifier:adaboost:learning_rate")  # log-uniform on [0.01, 2]
    ada = replace_choice(sp, cfg, "classifier", "adaboost", {
        "classifier:adaboost:n_estimators": 50, "classifier:adaboost:learning_rate": float(np.sqrt(0.01 * 2.0)),
        "classifier:adaboost:max_depth": 1, "classifier:adaboost:criterion": "gini"})
    assert sp.encode([ada])[0, lr] == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize("name,task", [(n, t) for n in KNOWN_SPACES for t in TASKS])
def test_sampling_is_deterministic_and_valid(name, task):
    sp = space(name, task)
    a, b, c = sp.sample(30, 7), sp.sample(30, 7), sp.sample(30, 8)
    assert a == b
    assert a != c
    assert len(sp.sample(1, 0)) == 1 and sp.sample(0, 0) == []
    for config in a[:10]:
        assert sp.validate(config) == config
        assert all(not isinstance(v, np.generic) for v in config.values())


def _same(a, b):
    # ConfigSpace 0.4/0.6 re-derive float values from the [0, 1] vector: allow round-off
    if isinstance(a, float) and isinstance(b, float):
        return b == pytest.approx(a, rel=1e-9, abs=1e-12)
    return a == b


def _descendants(cs, name):
    out, todo = set(), [name]
    while todo:
        for child in C.children_of(cs, todo.pop()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


@pytest.mark.parametrize("name,task", [(n, t) for n in KNOWN_SPACES for t in TASKS])
def test_neighbours_change_one_hyperparameter(name, task):
    sp = space(name, task)
    bases = sp.sample(6, 4) + [sp.default()]
    for i, base in enumerate(bases):
        neighbours = sp.neighbours(base, 12, np.random.RandomState(i))
        assert neighbours
        assert neighbours == sp.neighbours(base, 12, np.random.RandomState(i))
        for nb in neighbours:
            assert sp.validate(nb) == nb
            common = set(base) & set(nb)
            changed = [k for k in common if not _same(base[k], nb[k])]
            switched = set(base) ^ set(nb)
            assert len(changed) == 1, (changed, switched)
            assert switched <= _descendants(sp.configspace, changed[0])
    # a choice hyperparameter's neighbours include other algorithms
    moves = sp.neighbours(sp.default(), 200, 0)
    assert len({sp.algorithm_of(c) for c in moves}) > 1


# --------------------------------------------------------------------------- user spaces, errors
def _user_configspace():
    cs = C.new_space(name="tiny")
    model = C.categorical("model", ["ridge", "knn"], "ridge")
    alpha = C.uniform_float("alpha", 1e-3, 10.0, 1.0, log=True)
    k = C.uniform_int("k", 1, 15, 3)
    C.add_hyperparameters(cs, [model, alpha, k])
    C.add_conditions(cs, [C.equals(alpha, model, "ridge"), C.equals(k, model, "knn")])
    return cs


def _user_builder(config, seed):
    from sklearn.linear_model import RidgeClassifier
    from sklearn.neighbors import KNeighborsClassifier

    if config["model"] == "ridge":
        return RidgeClassifier(alpha=config["alpha"], random_state=seed)
    return KNeighborsClassifier(n_neighbors=config["k"])


def test_user_space_from_configspace(data):
    X, y, X_test = data["classification"]
    sp = SearchSpace.from_configspace(_user_configspace(), _user_builder, task="classification")
    assert sp.name == "user" and sp.task == "classification" and sp.n_hyperparameters == 3
    assert sp.algorithm_of(sp.default()) == "user"
    configs = sp.sample(10, 0)
    E = sp.encode(configs)
    assert E.shape == (10, 3) and np.all((E == -1) | ((E >= 0) & (E <= 1)))
    for config in configs[:4]:
        pred, is_proba = fit_predict(sp.build(config, 0), "classification", X, y, X_test)
        check_predictions(pred, is_proba, "classification", y, len(X_test))
    assert sp.neighbours(configs[0], 3, 1)
    keyed = SearchSpace.from_configspace(_user_configspace(), _user_builder, "classification",
                                         name="mine", algorithm_key="model")
    assert keyed.algorithms == ["ridge", "knn"]
    assert {keyed.algorithm_of(c) for c in keyed.sample(40, 2)} == {"ridge", "knn"}
    assert get_space(keyed, "classification") is keyed
    with pytest.raises(ValueError):
        get_space(keyed, "regression")
    with pytest.raises(ValueError):
        SearchSpace.from_configspace(_user_configspace(), _user_builder, "ranking")
    with pytest.raises(ValueError):
        SearchSpace.from_configspace(_user_configspace(), _user_builder, "classification", algorithm_key="nope")
    with pytest.raises(ValueError):
        sp.build({"model": "ridge", "alpha": 1.0, "k": 3}, 0)  # k is inactive for ridge


def test_unknown_space_and_task():
    with pytest.raises(ValueError) as info:
        get_space("autoweka", "classification")
    for known in KNOWN_SPACES:
        assert known in str(info.value)
    assert isinstance(get_space("auto-sklearn", "regression"), SearchSpace)
    with pytest.raises(ValueError):
        get_space("autosklearn", "clustering")


def test_autogluon_algorithm_selection():
    sp = autogluon_space("classification", algorithms=["linear", "lightgbm"])
    assert sp.algorithms == ["linear", "lightgbm"]
    assert sp.algorithm_of(sp.default()) == "linear"
    with pytest.raises(ValueError):
        autogluon_space("classification", algorithms=["tabpfn"])
    for algorithm, module in OPTIONAL.items():
        if algorithm not in available_algorithms():
            with pytest.raises(ImportError):
                autogluon_space("regression", algorithms=[algorithm])


# --------------------------------------------------------------------------- cs_compat
def test_cs_compat_round_trips():
    cs = _user_configspace()
    configs = C.sample_configurations(cs, 5, 1)
    assert len(C.sample_configurations(cs, 1, 1)) == 1
    for config in configs:
        array = C.config_to_array(config)
        assert array.dtype == np.float64 and array.shape == (3,)
        assert np.isnan(array).sum() == 1  # one of alpha / k is inactive
        back = C.array_to_config(cs, array)
        assert C.config_to_dict(back) == C.config_to_dict(config)
        values = C.config_to_dict(config)
        assert type(values["model"]) is str
        assert C.config_to_dict(C.make_configuration(cs, values)) == values
        for name, value in values.items():
            hp = C.get_hyperparameter(cs, name)
            back_value = C.vector_to_value(hp, C.value_to_vector(hp, value))
            if isinstance(value, str):
                assert back_value == value
            else:
                assert back_value == pytest.approx(value)
    assert C.make_configuration(cs, {"model": "knn", "k": 4.0})["k"] == 4  # JSON floats coerced
    with pytest.raises(ValueError):
        C.make_configuration(cs, {"model": "knn", "k": 4, "bogus": 1})
    assert C.hyperparameter_names(cs) and set(C.hyperparameter_names(cs)) == {"model", "alpha", "k"}
    assert C.config_to_dict(C.default_configuration(cs)) == {"model": "ridge", "alpha": 1.0}
    assert C.one_exchange_neighbours(C.default_configuration(cs), 0, 0) == []

"""One record of a search's options, and one registry of methods: every front end offers the same options, and a
new method is one entry."""

import json

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.cli import build_parser, run_config_from_args
from optdiv.config import RunConfig
from optdiv.data import from_frame, split
from optdiv.engine.run import run
from optdiv.engine.search import search
from optdiv.final.choice import FINALS
from optdiv.sklearn import OptDivClassifier, OptDivRegressor
from optdiv.strategies.methods import METHODS, MethodSpec, get_method
import optdiv.strategies.model_based as model_based_module
from optdiv.strategies.registry import STRATEGIES, make_strategy

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}


@pytest.fixture(scope="module")
def cls_splits():
    frame = load_breast_cancer(as_frame=True).frame.sample(240, random_state=0)
    return split(from_frame(frame, target="target", name="breast_cancer"), seed=0)


def test_an_unknown_option_is_named():
    with pytest.raises(ValueError, match="unknown search option ensemble_sise"):
        RunConfig.from_options(ensemble_sise=5)
    with pytest.raises(ValueError, match="unknown search options bugdet, methd"):
        RunConfig().replace(methd="rs", bugdet=3)


def test_every_option_reaches_the_command_line_and_the_estimators():
    fields = set(RunConfig.names()) - {"optimizer_options"}  # research/test knobs of one strategy
    parsed = run_config_from_args(build_parser().parse_args(["run", "--data", "x.csv"]))
    assert set(parsed.options()) == set(RunConfig.names())
    flags = build_parser().parse_args(["run", "--data", "x.csv", "--constraint", "fit_seconds<=3", "--inject-faults",
                                       "raise=0.5", "--memory-limit", "900", "--workers", "2", "--pool",
                                       "agnostic_bayes", "--vote", "--ensemble-size", "7"])
    config = run_config_from_args(flags)
    assert (config.memory_limit_mb, config.workers, config.pool, config.vote, config.ensemble_size) == \
        (900, 2, "agnostic_bayes", True, 7)
    assert config.faults == "raise=0.5" and len(config.constraints) == 1
    for estimator in (OptDivClassifier(), OptDivRegressor()):
        assert fields <= set(estimator.get_params())
    estimator = OptDivClassifier(pool="agnostic_bayes", workers=2, memory_limit_mb=512, constraints=["fit_seconds<=9"])
    assert estimator.run_config() == RunConfig(**{**{k: v for k, v in estimator.get_params().items()
                                                     if k in fields}})
    assert estimator.run_config().pool == "agnostic_bayes"


def test_memory_limit_is_on_by_default_and_takes_auto_none_or_megabytes():
    assert RunConfig.product().memory_limit_mb == "auto" and RunConfig().memory_limit_mb is None
    assert OptDivClassifier().memory_limit_mb == "auto"
    for flag, value in (("auto", "auto"), ("none", None), ("2048", 2048)):
        args = build_parser().parse_args(["run", "--data", "x.csv", "--memory-limit", flag])
        assert run_config_from_args(args).memory_limit_mb == value
    assert run_config_from_args(build_parser().parse_args(["run", "--data", "x.csv"])).memory_limit_mb == "auto"
    for bad in ("0", "lots"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["run", "--data", "x.csv", "--memory-limit", bad])
    with pytest.raises(ValueError, match="memory_limit_mb"):
        RunConfig(memory_limit_mb="lots")
    assert "memory_limit_mb" not in RunConfig(memory_limit_mb="auto").settings()  # "auto" changes no kept evaluation


def test_stored_settings_keep_the_older_form():
    settings = RunConfig(time_limit=30.0).settings()
    assert set(settings) == {"method", "metric", "space", "budget", "time_limit", "ensemble", "ensemble_size",
                             "refit", "sampler", "vote", "pool"}  # later options are stored only when set
    settings = RunConfig(constraints=["fit_seconds<=3"], cv=5, faults="raise=0.2", memory_limit_mb=800,
                         portfolio=[{"algorithm": "tree"}]).settings()
    assert settings["cv"] == 5 and settings["memory_limit_mb"] == 800
    assert settings["constraints"] == ["fit_seconds<=3.0"] and settings["portfolio"] == [{"algorithm": "tree"}]
    assert settings["faults"].startswith("raise=0.2")
    json.dumps(settings)


def test_a_run_stored_with_only_the_options_it_was_given_still_resumes(tmp_path):
    frame = load_breast_cancer(as_frame=True).frame.sample(200, random_state=1)
    data = tmp_path / "bc.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "run"
    run(str(data), out=str(out), method="rs", budget=2, space=tiny_space("classification"), cv=None)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text())
    for key in ("sampler", "vote", "pool", "ensemble"):  # what a run stored before every option was written
        meta.pop(key)
    meta_path.write_text(json.dumps(meta))
    result, _ = run(str(data), out=str(out), resume=True, method="rs", budget=3, space=tiny_space("classification"),
                    cv=None)
    assert len(result.history) == 3
    with pytest.raises(Exception, match="pool"):  # a setting that differs from its default is still refused
        run(str(data), out=str(out), resume=True, method="rs", budget=4, space=tiny_space("classification"), cv=None,
            pool="agnostic_bayes")


def test_every_method_names_a_registered_strategy_and_final():
    for spec in METHODS.values():
        assert spec.strategy in STRATEGIES and spec.final in FINALS
        strategy = make_strategy(spec, tiny_space("classification"), "error", seed=0, budget=10)
        assert callable(strategy.suggest)


def test_a_new_method_is_one_entry(cls_splits, monkeypatch):
    spec = MethodSpec("bo-top3", "bo", "bagging", "BO, uniform average of the 5 best")
    monkeypatch.setitem(METHODS, spec.name, spec)
    result = search(cls_splits, "classification", n_classes=2, method="bo-top3", space=tiny_space("classification"),
                    budget=7, seed=0, optimizer_options=FAST)
    assert get_method("bo-top3") is spec
    assert len(result.member_indices) == 5 and np.allclose(result.weights, 0.2)
    assert result.info["strategy"] == "bo" and result.info["final"] == "bagging"


def test_the_run_s_ensemble_size_reaches_the_diversity_pool(cls_splits, monkeypatch):
    sizes = []
    real = model_based_module.Optimizer.__init__

    def spy(self, *args, **kwargs):
        sizes.append((kwargs.get("selector_options") or {}).get("ensemble_size"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(model_based_module.Optimizer, "__init__", spy)
    search(cls_splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
           budget=6, seed=0, ensemble_size=4, optimizer_options=FAST)
    search(cls_splits, "classification", n_classes=2, method="divbo", space=tiny_space("classification"),
           budget=6, seed=0, optimizer_options=FAST)
    assert sizes == [4, 25]


def test_the_command_line_python_run_and_the_estimators_search_with_the_same_defaults():
    from optdiv.engine.run import RUN_DEFAULTS
    from optdiv.evaluation.constraints import parse_constraints

    product = RunConfig.product()

    def plain(config):  # constraints: None and () both mean none
        return {**config.options(), "constraints": parse_constraints(config.constraints)}

    cli = run_config_from_args(build_parser().parse_args(["run", "--data", "x.csv"]))
    assert plain(cli) == plain(product)
    assert plain(RUN_DEFAULTS) == plain(product)
    for estimator in (OptDivClassifier(), OptDivRegressor()):
        assert plain(estimator.run_config()) == plain(product)
    # the product departs from the papers' protocol, which search() and the benchmarks keep
    papers = RunConfig()
    assert (product.cv, product.portfolio, product.refit, product.fold_models) == ("auto", "auto", True, "bagged")
    assert (papers.cv, papers.portfolio, papers.refit, papers.fold_models) == (None, None, False, "refit")
    assert RunConfig.product(refit=False).refit is False


def test_the_products_evaluation_budget_is_the_time_budget_when_one_is_given():
    # a time budget alone ends the product's search (no cap of 50 left idle time on small data); without one the
    # papers' 50 evaluations stay, and a number given caps the search under a time budget too
    product = RunConfig.product()
    assert product.budget == "auto" and product.evaluations() == 50
    assert RunConfig.product(time_budget=60).evaluations() is None
    assert RunConfig.product(time_budget=60, budget=80).evaluations() == 80
    assert RunConfig(time_budget=60).evaluations() == 50  # the papers' protocol keeps its count


def test_optdiv_run_and_the_command_line_make_the_same_search(tmp_path):
    from optdiv.cli import main

    frame = load_breast_cancer(as_frame=True).frame.sample(200, random_state=3)
    data = tmp_path / "bc.csv"
    frame.to_csv(data, index=False)
    assert main(["run", "--data", str(data), "--budget", "3", "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    run(str(data), budget=3, out=str(tmp_path / "python"))
    a, b = (json.loads((tmp_path / d / "result.json").read_text()) for d in ("cli", "python"))
    assert a["evaluation"] == b["evaluation"] == "5-fold CV"  # cross-validation on small data, both ways
    assert [m["config"] for m in a["ensemble"]] == [m["config"] for m in b["ensemble"]]
    assert a["val_error"] == b["val_error"] and a["test_error"] == b["test_error"]
    assert a["final_model"]["rows"] == b["final_model"]["rows"] == "train+validation"


@pytest.mark.parametrize("option,value,match", [
    ("method", "smac", "unknown method 'smac'"),
    ("budget", 0, "budget must be at least 1"),
    ("budget", "many", "budget must be a number of evaluations, None or 'auto'"),
    ("time_budget", 0, "time_budget must be positive"),
    ("time_limit", "soon", "time_limit must be a number of seconds or 'auto'"),
    ("time_limit", -1, "time_limit must be positive"),
    ("ensemble", "voting", "unknown ensemble builder"),
    ("ensemble_bags", -1, "ensemble_bags must be 0"),
    ("ensemble_bags", "many", "ensemble_bags must be a number or 'auto'"),
    ("pool", "best", "unknown pool builder"),
    ("sampler", "gibbs", "unknown Agnostic Bayes sampler"),
    ("constraints", ["latency<=1"], "unknown measure"),
    ("faults", "crash=0.5", "unknown fault kind"),
    ("cv", 1, "cv must be a number of folds"),
    ("fold_models", "stacked", "fold_models must be one of"),
    ("algorithm_share", 1.5, "algorithm_share must be in"),
    ("n_jobs", 0, "n_jobs must not be 0"),
    ("n_jobs", 1.5, "n_jobs must be a whole number"),
])
def test_each_option_is_checked_when_the_config_is_made(option, value, match):
    with pytest.raises(ValueError, match=match):
        RunConfig(**{option: value})
    with pytest.raises(ValueError, match=match):  # and when an option of an existing config is replaced
        RunConfig.product().replace(**{option: value})

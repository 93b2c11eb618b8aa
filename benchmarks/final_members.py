"""Two ways to spend a search's last seconds on the final members, measured before building either into the engine.

``bags``: is a member worth more as a bag of fold models than as one refit on every row? For each dataset, seed
and algorithm (each at its library's defaults), on the same stratified 80/20 split as ``benchmarks/race.py``, with
the training part split 75/25 as the estimators' holdout:

- ``train``: fitted on the 75 % training part (a member as the search evaluated it);
- ``refit``: refitted on train+validation (optdiv's final member);
- ``blend``: the two above averaged (no fit beyond what the engine already makes);
- ``bag4``: four fits, each leaving out one quarter of train+validation, averaged (AutoGluon's bagging; the
  ``train`` fit is one of such four, so three more fits than the engine makes);
- ``bag4+refit``: the four and the refit averaged.

``ensemble``: does the gain of ``bags`` reach the final ensemble? For each dataset and seed the estimator's
defaults search (``--seconds``, one core, a holdout split, as on every set of 4,000 rows or more); then each final member is fitted here again in three ways,
with the ensemble's weights unchanged: ``refit`` (on train+validation), ``bag4`` (four fits, each leaving out one
quarter of train+validation, the validation rows being one quarter) and ``bag4+refit``; ``estimator`` is the
estimator's own final model (members refitted as far as its time budget allowed).

``reselect``: does choosing the final ensemble on fresh cross-validation folds over-fit less on small data? For each
dataset and seed the estimator's defaults search (``--seconds``, one core) under 5-fold cross-validation; then
its final selection (the product's loss and bags) is made again over the same history in five ways, every member
refitted here on every training row and scored on the test rows, so the ways differ only in the rows they choose on:

- ``all``: over every evaluation, on the search's out-of-fold predictions (what the product does);
- ``top``: among the ``--top`` evaluations of lowest loss, on the same predictions;
- ``fresh``: among those, on out-of-fold predictions of a new 5-fold split (each re-evaluated);
- ``avg2`` / ``avg3``: among those, on the average of the search's and one or two new splits' predictions.

``prior``: does a constant member (the training rows' class frequencies, or their mean) in the final selection
guard against models that do not beat it? For each dataset and seed the estimator's defaults search (``--seconds``,
one core; cross-validated or holdout as the estimator decides); then its final selection is made again over the
same history with and without that member, every member refitted here on every training row:

- ``all``: the product's selection over every evaluation;
- ``prior``: the same with the constant member as one more candidate (its validation prediction made, like the
  others', from the rows its fold or holdout trains on).

    python benchmarks/final_members.py bags --data-dir ../shared/datasets --datasets satimage,elevators,eeg,pol \\
        --seeds 0,1,2 --out runs/final-members
    python benchmarks/final_members.py ensemble --data-dir ../shared/datasets --datasets satimage,elevators \
        --seeds 0,1 --seconds 90 --out runs/final-members
    python benchmarks/final_members.py reselect --data-dir ../shared/datasets --datasets bodyfat,quake \\
        --seeds 0-5 --seconds 90 --out runs/final-members
    python benchmarks/final_members.py prior --data-dir ../shared/datasets --datasets quake,wind \\
        --seeds 0-4 --seconds 60 --out runs/final-members
    python benchmarks/final_members.py size --data-dir ../shared/datasets --datasets cpu_act,quake \\
        --seeds 0-4 --seconds 60 --out runs/final-members
    python benchmarks/final_members.py pool --data-dir ../shared/datasets --datasets cpu_act,quake \\
        --seeds 0-4 --seconds 60 --out runs/final-members
    python benchmarks/final_members.py longer --data-dir ../shared/datasets --datasets amazon_employee,wind \
        --seeds 0-2 --seconds 60 --out runs/final-members
    python benchmarks/final_members.py foldbags --data-dir ../shared/datasets --datasets bodyfat,quake \\
        --seeds 0-4 --seconds 60 --out runs/final-members
    python benchmarks/final_members.py report --out runs/final-members

``size``: does the final selection want more or fewer greedy steps than the product's 25 (auto-sklearn takes
50)? The same searches and refits as ``prior``; the product's selection made again with ``size10``, ``size50``
and ``size100`` steps (``all``: its own 25).

``pool``: does the final selection over-fit the validation rows less when it chooses among fewer, better-supported
candidates? The same searches and refits as ``prior``; the product's selection made again among only the 5, 10
and 20 evaluations of lowest validation loss (``top5``, ``top10``, ``top20``; ``all``: every evaluation).

``stack``: does a model fitted on the selected members' validation predictions combine them better than the
selection's weights? The same searches and refits as ``prior``; ``stack``: the product's ``Stacker`` (logistic
regression on class probabilities, ridge on values) over the selection's members, ``blend``: its prediction averaged
with the weighted ensemble's (``all``).

``longer``: is a member worth refitting with more rounds than the search scored? The same searches and refits as
``prior``; the product's selection unchanged, its forest members (random forests and extra trees) refitted with 300
trees (``trees300``; the search fits 100), or its LightGBM members with half their
learning rate for twice their rounds (``slow2``); every other member as in ``all``. ``forest_weight`` and
``lightgbm_weight``: their shares of the selection.

``foldbags``: on cross-validated data, is a member worth more as the bag of its fold models (the very fits whose
out-of-fold predictions chose it) than as one refit on every row? The same searches as ``prior``, skipping those
on a holdout split; the product's selection unchanged, its members as refitted on every training row (``all``), as
the average of five fits, each on the rows of four of the search's folds (``bags``), and as those five and the refit
averaged (``bags+refit``).

Each line of OUT/bags.jsonl, OUT/ensemble.jsonl, OUT/reselect.jsonl, OUT/prior.jsonl, OUT/size.jsonl,
OUT/pool.jsonl, OUT/stack.jsonl, OUT/longer.jsonl and OUT/foldbags.jsonl is one (dataset, seed[, algorithm]) with
every variant's test error (% or MSE); ``report`` prints the means and, per variant, lower / level / higher against
``refit`` (bags, ensemble) or ``all`` (reselect, prior, size, pool, stack, longer, foldbags) with a two-sided
Wilcoxon p over the pairs.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from race import dataset_task, make_split  # noqa: E402  the race's split and task rule, so these are its rows

from optdiv.bench.harness import parse_seeds  # noqa: E402
from optdiv.bench.stats import paired_p  # noqa: E402
from optdiv.final.model import model_prediction  # noqa: E402  class probabilities or values, as scored

BAG_FOLDS = 4  # the holdout's 75/25 is one of four folds
BAG_VARIANTS = ("train", "refit", "blend", "bag4", "bag4+refit")
RESELECT_VARIANTS = ("all", "top", "fresh", "avg2", "avg3")
ENSEMBLE_VARIANTS = ("estimator", "refit", "bag4", "bag4+refit")
PRIOR_VARIANTS = ("all", "prior")
SIZES = (10, 50, 100)  # Caruana steps besides the product's
POOLS = (5, 10, 20)  # the final selection's candidates: only this many evaluations of lowest validation loss


def _load(data_dir: Path, name: str):
    import pandas as pd

    csv = data_dir / f"{name}.csv"
    frame = pd.read_csv(csv)
    return frame.iloc[:, :-1], frame.iloc[:, -1], dataset_task(csv)


def _error(task: str, y_true, pred) -> float:
    """0/1 error in % of class probabilities, or MSE of values."""
    if task == "classification":
        return 100.0 * float(np.mean(np.argmax(pred, axis=1) != y_true))
    return float(np.mean((np.asarray(pred, dtype=float) - y_true) ** 2))


def _record(path: Path, line: dict) -> None:
    """Append ``line`` to the JSON-lines file ``path`` as soon as it is measured, and show it."""
    with open(path, "a") as fh:
        fh.write(json.dumps(line) + "\n")
    print(json.dumps(line), flush=True)


def _test_prediction(build, X, y, X_test, y_true, task, n_classes, seed, config):
    """``config`` built by ``build`` (a space's) and fitted on ``X``, ``y``: its test rows' prediction, None when it
    fails."""
    from optdiv.data import Splits
    from optdiv.evaluation.fitting import fit_predict

    on = Splits(X, y, X.iloc[:2], y[:2], X_test, y_true, None)  # two validation rows: the split needs some
    run = fit_predict(build, on, task, n_classes, seed, config)
    return run["test_pred"] if run["ok"] else None


def _algorithms(task: str) -> dict:
    """The strong algorithms at their libraries' defaults (one thread: the engine's evaluations)."""
    import lightgbm as lgb
    from sklearn import ensemble, neighbors

    if task == "classification":
        return {"random_forest": lambda: ensemble.RandomForestClassifier(random_state=1),
                "extra_trees": lambda: ensemble.ExtraTreesClassifier(random_state=1),
                "lightgbm": lambda: lgb.LGBMClassifier(random_state=1, verbose=-1, n_jobs=1),
                "hist_gradient_boosting": lambda: ensemble.HistGradientBoostingClassifier(random_state=1),
                "k_nearest_neighbors": lambda: neighbors.KNeighborsClassifier()}
    return {"random_forest": lambda: ensemble.RandomForestRegressor(random_state=1),
            "extra_trees": lambda: ensemble.ExtraTreesRegressor(random_state=1),
            "lightgbm": lambda: lgb.LGBMRegressor(random_state=1, verbose=-1, n_jobs=1),
            "hist_gradient_boosting": lambda: ensemble.HistGradientBoostingRegressor(random_state=1),
            "k_nearest_neighbors": lambda: neighbors.KNeighborsRegressor()}


def run_bags(args) -> None:
    from sklearn.model_selection import KFold, StratifiedKFold

    out = args.out / "bags.jsonl"
    for name in args.datasets:
        X, y, task = _load(args.data_dir, name)
        X = X.apply(lambda c: c.astype("category").cat.codes if c.dtype == object else c).to_numpy(dtype=float)
        y = np.unique(np.asarray(y), return_inverse=True)[1] if task == "classification" else np.asarray(y, float)
        for seed in args.seeds:
            train, test = make_split(y, task, seed)
            X_all, y_all, X_test, y_test = X[train], y[train], X[test], y[test]
            splitter = (StratifiedKFold if task == "classification" else KFold)(BAG_FOLDS, shuffle=True,
                                                                               random_state=seed)
            folds = [kept for kept, _ in splitter.split(X_all, y_all)]
            for algorithm, make in _algorithms(task).items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    bag = [model_prediction(make().fit(X_all[kept], y_all[kept]), X_test, task) for kept in folds]
                    refit = model_prediction(make().fit(X_all, y_all), X_test, task)
                preds = {"train": bag[0], "refit": refit, "blend": (bag[0] + refit) / 2,
                         "bag4": np.mean(bag, axis=0), "bag4+refit": np.mean(bag + [refit], axis=0)}
                line = {"dataset": name, "seed": seed, "algorithm": algorithm, "task": task,
                        **{k: _error(task, y_test, p) for k, p in preds.items()}}
                _record(out, line)


def _searched(args, name, seed, cv):
    """The estimator's defaults but ``cv`` (None: a holdout split) fitted on the race's training rows of ``name``:
    (model, its holdout rebuilt as it built it, test rows, encoded test targets, task, number of classes)."""
    from optdiv.data import from_xy, split_train_validation
    from optdiv.sklearn import OptDivClassifier, OptDivRegressor

    X, y, task = _load(args.data_dir, name)
    train, test = make_split(y, task, seed)
    X_fit, y_fit = X.iloc[train].reset_index(drop=True), y.iloc[train].reset_index(drop=True)
    X_test, y_test = X.iloc[test].reset_index(drop=True), y.iloc[test].reset_index(drop=True)
    cls = OptDivClassifier if task == "classification" else OptDivRegressor
    model = cls(time_budget=args.seconds, seed=seed, n_jobs=1, cv=cv).fit(X_fit, y_fit)
    data = from_xy(X_fit, y_fit, task=task)
    holdout = split_train_validation(data, seed=seed, val_size=model.validation_size)
    n_classes = None if data.classes is None else len(data.classes)
    y_true = (np.searchsorted(np.asarray(data.classes), np.asarray(y_test)) if task == "classification"
              else np.asarray(y_test, float))
    return model, holdout, X_test, y_true, task, n_classes


def _refits_and_bags(members, refit_of, bag_of, names) -> tuple:
    """({name: predictions}, weights) of ``members``, (key, weight) pairs, in three ways named by ``names``: each
    member's refit (``refit_of(key)``), the mean of its bag (``bag_of(key)``: a list of predictions), and the mean of
    both; a member with any fit that failed is left out of every way alike, the others' weights renormalised."""
    preds, kept = {name: [] for name in names}, []
    for key, weight in members:
        refit, bag = refit_of(key), bag_of(key)
        if refit is None or any(p is None for p in bag):
            continue
        for name, pred in zip(names, (refit, np.mean(bag, axis=0), np.mean(bag + [refit], axis=0))):
            preds[name].append(pred)
        kept.append(float(weight))
    return preds, np.asarray(kept) / np.sum(kept)


def run_ensemble(args) -> None:
    import pandas as pd

    from optdiv.final.choice import weighted_prediction

    out = args.out / "ensemble.jsonl"
    for name in args.datasets:
        for seed in args.seeds:
            model, holdout, X_test, y_true, task, n_classes = _searched(args, name, seed, None)
            if not np.allclose(np.asarray(holdout.y_val, float), np.asarray(model.validation_targets_, float)):
                raise RuntimeError("the rebuilt holdout is not the estimator's (cross-validated or row-sampled?)")
            result = model.result_
            X_all = pd.concat([holdout.X_train, holdout.X_val], axis=0, ignore_index=True)
            y_all = np.concatenate([holdout.y_train, holdout.y_val])
            n_train = len(holdout.y_train)
            # four quarters of train+validation: the validation rows, and the training rows dealt in three
            parts = np.array_split(np.random.default_rng(seed).permutation(n_train), 3)
            fits = [np.arange(n_train)] + [np.setdiff1d(np.arange(len(y_all)), part) for part in parts]

            def test_pred(config, rows):
                return _test_prediction(result.space.build, X_all.iloc[rows], y_all[rows], X_test, y_true, task,
                                        n_classes, seed, config)

            members, weights = _refits_and_bags(
                zip(result.member_indices, result.weights),
                lambda i: test_pred(result.history[i].config, np.arange(len(y_all))),
                lambda i: [test_pred(result.history[i].config, rows) for rows in fits], ENSEMBLE_VARIANTS[1:])
            own = model_prediction(model, X_test, task)
            line = {"dataset": name, "seed": seed, "task": task, "seconds": args.seconds,
                    "evaluations": len(result.history), "members": len(weights),
                    "of_members": len(result.member_indices), "estimator": _error(task, y_true, own),
                    **{k: _error(task, y_true, weighted_prediction(v, weights)) for k, v in members.items()}}
            _record(out, line)


def run_reselect(args) -> None:
    from optdiv.data import cross_validation_view
    from optdiv.evaluation.fitting import fit_predict
    from optdiv.final.choice import choose_members, weighted_prediction

    out = args.out / "reselect.jsonl"
    for name in args.datasets:
        for seed in args.seeds:
            model, holdout, X_test, y_true, task, n_classes = _searched(args, name, seed, 5)
            result = model.result_
            view = cross_validation_view(holdout, 5, seed, task)  # the estimator's own folds
            if not np.allclose(np.asarray(view.y_val, float), np.asarray(model.validation_targets_, float)):
                raise RuntimeError("the rebuilt folds are not the estimator's")
            selection, loss = result.info["ensemble_selection"], result.info["metric"]
            ok = [obs for obs in result.history if obs.status == "ok"]
            top = sorted(ok, key=lambda obs: obs.val_loss)[:args.top]
            fresh = {obs.index: [] for obs in top}
            for repeat in (1, 2):
                folds = cross_validation_view(holdout, 5, seed + 1000 * repeat, task)
                for obs in top:
                    run = fit_predict(result.space.build, folds, task, n_classes, seed, obs.config)
                    if run["ok"]:
                        fresh[obs.index].append(run["val_pred"])
            tested = {}

            def test_pred(obs):
                if obs.index not in tested:
                    tested[obs.index] = _test_prediction(result.space.build, view.X_train, view.y_train, X_test,
                                                         y_true, task, n_classes, seed, obs.config)
                return tested[obs.index]

            def chosen(candidates) -> float:
                members, weights = choose_members(candidates, view.y_val, loss, "caruana", model.ensemble_size, seed,
                                                  selection_loss=selection["loss"], bags=selection["bags"])
                preds = [test_pred(candidates[i].obs) for i in members]
                kept = [k for k, p in enumerate(preds) if p is not None]
                weights = weights[kept] / weights[kept].sum()
                return _error(task, y_true, weighted_prediction([preds[k] for k in kept], weights))

            def as_candidates(observations, val_pred):
                return [SimpleNamespace(status="ok", val_pred=val_pred(obs), obs=obs) for obs in observations]

            again = [obs for obs in top if len(fresh[obs.index]) == 2]
            line = {"dataset": name, "seed": seed, "task": task, "seconds": args.seconds,
                    "evaluations": len(result.history),
                    "estimator": _error(task, y_true, model_prediction(model, X_test, task)),
                    "all": chosen(as_candidates(ok, lambda o: o.val_pred)),
                    "top": chosen(as_candidates(top, lambda o: o.val_pred)),
                    "fresh": chosen(as_candidates(again, lambda o: fresh[o.index][0])),
                    "avg2": chosen(as_candidates(again, lambda o: (o.val_pred + fresh[o.index][0]) / 2)),
                    "avg3": chosen(as_candidates(again, lambda o: (o.val_pred + sum(fresh[o.index])) / 3))}
            _record(out, line)


def _constant(y, task: str, n_classes) -> np.ndarray:
    """What a model that ignores the features predicts after fitting on targets ``y``."""
    if task == "classification":
        return np.bincount(np.asarray(y, dtype=np.int64), minlength=n_classes) / len(y)
    return np.asarray(np.mean(np.asarray(y, dtype=float)))


def _reselection(args, name, seed):
    """The estimator's defaults searched on ``name`` (cross-validated or holdout as it decides), and what choosing
    its final ensemble again needs: the validation rows it chose on, every training row, and ``chosen``, which
    makes the product's selection over given candidates (``size`` steps) and scores it with every member refitted
    here on every training row. A candidate whose ``obs`` is None is the constant member (``prior_test``)."""
    import pandas as pd

    from optdiv.data import cross_validation_view
    from optdiv.final.choice import choose_members, weighted_prediction

    model, holdout, X_test, y_true, task, n_classes = _searched(args, name, seed, "auto")
    result = model.result_
    k = result.info.get("cv")
    if k:
        view = cross_validation_view(holdout, k, seed, task)  # the estimator's own folds
        X_all, y_all = view.X_train, np.asarray(view.y_train)
    else:
        view = holdout
        X_all = pd.concat([holdout.X_train, holdout.X_val], axis=0, ignore_index=True)
        y_all = np.concatenate([holdout.y_train, holdout.y_val])
    if not np.allclose(np.asarray(view.y_val, float), np.asarray(model.validation_targets_, float)):
        raise RuntimeError("the rebuilt validation rows are not the estimator's")
    prior_test = np.repeat(_constant(y_all, task, n_classes)[None], len(y_true), axis=0)
    selection, loss = result.info["ensemble_selection"], result.info["metric"]
    tested = {}

    def test_pred(obs, change=None):
        if obs is None:
            return prior_test
        if change is not None and not _changes(change, result.space.build, obs.config, seed):
            change = None  # a member the change leaves alone is its plain refit
        if (obs.index, change) not in tested:
            build = result.space.build if change is None else _changed(change, result.space.build)
            tested[obs.index, change] = _test_prediction(build, X_all, y_all, X_test, y_true, task, n_classes,
                                                         seed, obs.config)
        return tested[obs.index, change]

    def select(candidates, size=model.ensemble_size):
        """The product's selection over ``candidates``: (their positions, weights)."""
        return choose_members(candidates, view.y_val, loss, "caruana", size, seed, selection_loss=selection["loss"],
                              bags=selection["bags"])

    def selected(candidates, members, weights, change=None):
        """(test prediction, positions in ``members`` it holds) of a selection (``members``, ``weights``) of
        ``candidates``: the members with a test prediction, their weights renormalised; ``change``: a key of
        :data:`CHANGES`, the members it applies to refitted with it."""
        preds = [test_pred(candidates[i].obs, change) for i in members]
        kept = [j for j, p in enumerate(preds) if p is not None]
        return weighted_prediction([preds[j] for j in kept], weights[kept] / weights[kept].sum()), kept

    def scored(candidates, members, weights, change=None):
        """(test error, the constant member's weight) of a selection, as :func:`selected` predicts it."""
        share = float(sum(w for i, w in zip(members, weights) if candidates[i].obs is None))
        return _error(task, y_true, selected(candidates, members, weights, change)[0]), share

    def chosen(candidates, size=model.ensemble_size):
        """(test error, the constant member's weight) of the product's selection over ``candidates``."""
        return scored(candidates, *select(candidates, size))

    line = {"dataset": name, "seed": seed, "task": task, "seconds": args.seconds, "cv": k,
            "evaluations": len(result.history),
            "estimator": _error(task, y_true, model_prediction(model, X_test, task))}
    candidates = [SimpleNamespace(status="ok", val_pred=obs.val_pred, obs=obs)
                  for obs in result.history if obs.status == "ok"]
    return SimpleNamespace(line=line, chosen=chosen, select=select, selected=selected, scored=scored,
                           test_pred=test_pred, candidates=candidates, view=view, y_all=y_all, y_true=y_true,
                           prior_test=prior_test, task=task, n_classes=n_classes, result=result, seed=seed,
                           X_test=X_test)


def _reselections(args):
    """:func:`_reselection` for each dataset and seed of ``args``, in that order."""
    for name in args.datasets:
        for seed in args.seeds:
            yield _reselection(args, name, seed)


def _is_forest(model) -> bool:
    from sklearn.ensemble import (ExtraTreesClassifier, ExtraTreesRegressor, RandomForestClassifier,
                                  RandomForestRegressor)

    return isinstance(model, (RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier,
                              ExtraTreesRegressor))


def _more_trees(trees: int):
    def change(model) -> bool:
        if not _is_forest(model):
            return False
        model.set_params(n_estimators=trees)
        return True
    return change


def _slower(factor: int):
    """LightGBM at ``1/factor`` of its learning rate for ``factor`` times its rounds."""
    def change(model) -> bool:
        import lightgbm

        if not isinstance(model, lightgbm.LGBMModel):
            return False
        model.set_params(learning_rate=model.learning_rate / factor, n_estimators=model.n_estimators * factor)
        return True
    return change


#: What a member's refit may change: forests grown to more trees than the search fitted (100, auto-sklearn's
#: space), LightGBM boosted twice as long at half its learning rate.
CHANGES = {"trees300": _more_trees(300), "slow2": _slower(2)}


def _changes(change: str, build, config, seed) -> bool:
    """Whether ``CHANGES[change]`` applies to the model ``config`` builds."""
    from optdiv.evaluation.fitting import final_estimator

    return CHANGES[change](final_estimator(build(dict(config), seed)))


def _changed(change: str, build):
    """``build`` with ``CHANGES[change]`` applied to the model it builds."""
    from optdiv.evaluation.fitting import final_estimator

    def changed(config, seed):
        model = build(config, seed)
        CHANGES[change](final_estimator(model))
        return model
    return changed


def _weight_changed(again, members, weights, change: str) -> float:
    """The share of the selection (``members``, ``weights`` of ``again.candidates``) that ``CHANGES[change]``
    applies to."""
    return float(sum(w for i, w in zip(members, weights)
                     if _changes(change, again.result.space.build, again.candidates[i].obs.config, again.seed)))


def run_prior(args) -> None:
    out = args.out / "prior.jsonl"
    for again in _reselections(args):
        view, task, n_classes = again.view, again.task, again.n_classes
        if view.folds is not None:
            by_fold = {fold: _constant(again.y_all[view.folds != fold], task, n_classes)
                       for fold in np.unique(view.folds)}  # each fold's rows: the other folds' targets
            prior_val = np.stack([by_fold[fold] for fold in view.folds])
        else:
            prior_val = np.repeat(_constant(view.y_train, task, n_classes)[None], len(view.y_val), axis=0)
        plain, _ = again.chosen(again.candidates)
        guarded, share = again.chosen(again.candidates + [SimpleNamespace(status="ok", val_pred=prior_val,
                                                                          obs=None)])
        _record(out, {**again.line, "constant": _error(task, again.y_true, again.prior_test),
                      "prior_weight": round(share, 4), "all": plain, "prior": guarded})


def run_size(args) -> None:
    out = args.out / "size.jsonl"
    for again in _reselections(args):
        line = {**again.line, "all": again.chosen(again.candidates)[0]}
        for size in SIZES:
            line[f"size{size}"] = again.chosen(again.candidates, size)[0]
        _record(out, line)


def run_stack(args) -> None:
    from optdiv.final.choice import Stacker

    out = args.out / "stack.jsonl"
    for again in _reselections(args):
        members, weights = again.select(again.candidates)
        selected, kept = again.selected(again.candidates, members, weights)
        val = [again.candidates[members[j]].val_pred for j in kept]
        test = [again.test_pred(again.candidates[members[j]].obs) for j in kept]  # read back from the refits above
        stacked = Stacker(again.task, again.n_classes, again.seed).fit(val, np.asarray(again.view.y_val)).predict(test)
        _record(out, {**again.line, "members": len(kept), "all": _error(again.task, again.y_true, selected),
                      "stack": _error(again.task, again.y_true, stacked),
                      "blend": _error(again.task, again.y_true, (selected + stacked) / 2)})


def run_pool(args) -> None:
    out = args.out / "pool.jsonl"
    for again in _reselections(args):
        ranked = sorted(again.candidates, key=lambda c: c.obs.val_loss)
        line = {**again.line, "all": again.chosen(again.candidates)[0]}
        for count in POOLS:
            line[f"top{count}"] = again.chosen(ranked[:count])[0]
        _record(out, line)


def run_longer(args) -> None:
    out = args.out / "longer.jsonl"
    for again in _reselections(args):
        members, weights = again.select(again.candidates)
        line = {**again.line, "forest_weight": round(_weight_changed(again, members, weights, "trees300"), 4),
                "lightgbm_weight": round(_weight_changed(again, members, weights, "slow2"), 4),
                "all": again.scored(again.candidates, members, weights)[0]}
        for change in CHANGES:
            line[change] = again.scored(again.candidates, members, weights, change)[0]
        _record(out, line)


def run_foldbags(args) -> None:
    from optdiv.final.choice import weighted_prediction

    out = args.out / "foldbags.jsonl"
    for again in _reselections(args):
        view = again.view
        if view.folds is None:
            print(f"{again.line['dataset']}: a holdout split, not cross-validated; skipped", flush=True)
            continue
        build = again.result.space.build
        members, weights = again.select(again.candidates)

        def bag(i):
            """The test predictions of ``members[i]``'s fits on the rows of all folds but one, for each fold."""
            return [_test_prediction(build, view.X_train[view.folds != fold].reset_index(drop=True),
                                     np.asarray(view.y_train)[view.folds != fold], again.X_test, again.y_true,
                                     again.task, again.n_classes, again.seed, again.candidates[i].obs.config)
                    for fold in np.unique(view.folds)]

        preds, kept = _refits_and_bags(zip(members, weights), lambda i: again.test_pred(again.candidates[i].obs), bag,
                                       ("all", "bags", "bags+refit"))
        _record(out, {**again.line, "members": len(kept), "of_members": len(members),
                      **{k: _error(again.task, again.y_true, weighted_prediction(v, kept)) for k, v in preds.items()}})


def _table(lines, variants, reference, key) -> list:
    rows = [f"| {key} | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for group in sorted({line[key] for line in lines}):
        mine = [line for line in lines if line[key] == group]
        rows.append(f"| {group} | " + " | ".join(f"{np.mean([m[v] for m in mine]):.4g}" for v in variants) + " |")
    rows += ["", f"| against {reference} | lower | level | higher | median relative change | Wilcoxon p |",
             "|---|---|---|---|---|---|"]
    for variant in (v for v in variants if v != reference):
        ours = np.array([line[variant] for line in lines])
        theirs = np.array([line[reference] for line in lines])
        rel = np.where(theirs != 0, (ours - theirs) / np.where(theirs != 0, theirs, 1), 0.0)
        rows.append(f"| {variant} | {int(np.sum(ours < theirs))} | {int(np.sum(ours == theirs))} | "
                    f"{int(np.sum(ours > theirs))} | {100 * np.median(rel):+.1f} % | {paired_p(rel, np.zeros_like(rel)):.3g} |")
    return rows


def run_report(args) -> None:
    bags = args.out / "bags.jsonl"
    if bags.exists():
        lines = [json.loads(x) for x in bags.read_text().splitlines() if x.strip()]
        print(f"## bags: {len(lines)} (dataset, seed, algorithm) fits, test error by dataset\n")
        print("\n".join(_table(lines, BAG_VARIANTS, "refit", "dataset")))
        print("\nby algorithm:\n")
        print("\n".join(_table(lines, BAG_VARIANTS, "refit", "algorithm")[:2 + len({x["algorithm"] for x in lines})]))
    ensemble = args.out / "ensemble.jsonl"
    if ensemble.exists():
        lines = [json.loads(x) for x in ensemble.read_text().splitlines() if x.strip()]
        print(f"\n## ensemble: {len(lines)} (dataset, seed) searches, test error by dataset\n")
        print("\n".join(_table(lines, ENSEMBLE_VARIANTS, "refit", "dataset")))
    reselect = args.out / "reselect.jsonl"
    if reselect.exists():
        lines = [json.loads(x) for x in reselect.read_text().splitlines() if x.strip()]
        print(f"\n## reselect: {len(lines)} (dataset, seed) searches, test error by dataset\n")
        print("\n".join(_table(lines, ("estimator",) + RESELECT_VARIANTS, "all", "dataset")))
    prior = args.out / "prior.jsonl"
    if prior.exists():
        lines = [json.loads(x) for x in prior.read_text().splitlines() if x.strip()]
        print(f"\n## prior: {len(lines)} (dataset, seed) searches, test error by dataset\n")
        print("\n".join(_table(lines, ("estimator", "constant") + PRIOR_VARIANTS, "all", "dataset")))
        shares = [line["prior_weight"] for line in lines]
        print(f"\nconstant member kept in {sum(w > 0 for w in shares)} of {len(shares)} selections "
              f"(weight {min(shares):.2f}-{max(shares):.2f})")
    # variants named by a count after their prefix
    for check, prefix in (("size", "size"), ("pool", "top"), ("share", "share")):
        path = args.out / f"{check}.jsonl"
        if path.exists():
            lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            print(f"\n## {check}: {len(lines)} (dataset, seed) searches, test error by dataset\n")
            counts = sorted({key for key in lines[0] if key.startswith(prefix)}, key=lambda key: int(key[len(prefix):]))
            print("\n".join(_table(lines, ("estimator", "all", *counts), "all", "dataset")))
    stack = args.out / "stack.jsonl"
    if stack.exists():
        lines = [json.loads(x) for x in stack.read_text().splitlines() if x.strip()]
        print(f"\n## stack: {len(lines)} (dataset, seed) searches, test error by dataset\n")
        print("\n".join(_table(lines, ("estimator", "all", "stack", "blend"), "all", "dataset")))
    foldbags = args.out / "foldbags.jsonl"
    if foldbags.exists():
        lines = [json.loads(x) for x in foldbags.read_text().splitlines() if x.strip()]
        print(f"\n## foldbags: {len(lines)} (dataset, seed) searches, test error by dataset\n")
        print("\n".join(_table(lines, ("estimator", "all", "bags", "bags+refit"), "all", "dataset")))
    longer = args.out / "longer.jsonl"
    if longer.exists():
        lines = [json.loads(x) for x in longer.read_text().splitlines() if x.strip()]
        print(f"\n## longer: {len(lines)} (dataset, seed) searches, test error by dataset\n")
        print("\n".join(_table(lines, ("estimator", "all", *CHANGES), "all", "dataset")))
        for kind in ("forest", "lightgbm"):
            print(f"\n{kind} weight in the selection: mean {np.mean([x[kind + '_weight'] for x in lines]):.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in ("bags", "ensemble", "reselect", "prior", "size", "pool", "stack", "longer", "foldbags"):
        sub = commands.add_parser(command)
        sub.add_argument("--data-dir", type=Path, required=True)
        sub.add_argument("--datasets", type=lambda s: [x for x in s.split(",") if x], required=True)
        sub.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0,1,2"))
        sub.add_argument("--out", type=Path, required=True)
        if command != "bags":
            sub.add_argument("--seconds", type=float, default=90.0)
        if command == "reselect":
            sub.add_argument("--top", type=int, default=20)
    report = commands.add_parser("report")
    report.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command != "report":
        args.out.mkdir(parents=True, exist_ok=True)
    {"bags": run_bags, "ensemble": run_ensemble, "reselect": run_reselect, "prior": run_prior,
     "size": run_size, "pool": run_pool, "stack": run_stack, "longer": run_longer, "foldbags": run_foldbags,
     "report": run_report}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

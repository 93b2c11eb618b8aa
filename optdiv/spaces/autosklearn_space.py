"""DivBO's search space (Appendix A.3, VolcanoML-derived), built on scikit-learn and LightGBM.

Classification: a choice of 11 classifiers, a balancing choice, 6 rescalers and 15 feature
preprocessors (102 hyperparameters). Regression: 8 regressors, the same rescalers and 12
regression-valid preprocessors (81 hyperparameters). Both then have one switch of their own,
``value_shares:strategy`` (off / on: identifier-like columns' value shares appended, see
:mod:`optdiv.spaces.value_shares`), so 103 and 82; a search leaves it out where no column of its rows qualifies
(:func:`for_columns`). Names follow auto-sklearn's convention
(``classifier:__choice__``, ``classifier:random_forest:criterion``, ...). The pipeline is::

    value_shares -> rescaling -> feature_preprocessor -> classifier / regressor

and balancing ("weighting") sets ``class_weight="balanced"`` on the models (or the AdaBoost base
tree) that accept it; KNN, LDA and QDA have no class weights, as in auto-sklearn.

Ranges come from auto-sklearn 0.15 / VolcanoML (mindware) components; choices made here:

* gradient boosting is scikit-learn's **HistGradientBoosting** with auto-sklearn 0.15's seven
  hyperparameters (1 categorical + 6 numerical, as in the paper's table), but ``max_iter=200``
  (auto-sklearn: up to 512) and ``max_leaf_nodes`` at most 511 (auto-sklearn: 2047): a 2047-leaf
  tree costs about 0.5 s on 10k rows, so 512 of them (times the number of classes) would not fit;
* AdaBoost's ``algorithm`` (SAMME.R / SAMME) is replaced by the base tree's ``criterion``:
  SAMME.R was removed from scikit-learn (1.6-1.8), so the choice would be inert there;
* forests (and the extra-trees preprocessor) read ``max_features`` as an exponent:
  ``n_features ** max_features`` features per split, auto-sklearn's convention;
* AdaBoost has at most 200 rounds of depth-8 trees (auto-sklearn: 500 rounds, depth 10; 500
  depth-10 trees take minutes on 10k rows); QDA's default ``reg_param`` is 0.01, not 0: scikit-learn
  1.9 refuses a rank-deficient class covariance, which one-hot or redundant columns give at 0;
* LDA has auto-sklearn's three hyperparameters (VolcanoML's ``n_components`` only affects
  ``transform``, not the classifier's predictions);
* random trees embedding has no ``bootstrap`` (not a parameter of scikit-learn's
  ``RandomTreesEmbedding``); its output is sparse, so it is forbidden with LDA, QDA and
  gradient boosting, which need dense input;
* the polynomial preprocessor expands only the 25 (degree 2) / 10 (degree 3) best features by
  F-test and keeps the originals, like VolcanoML's bounded generator;
* LightGBM's ``subsample`` takes effect (``subsample_freq=1``);
* left out: VolcanoML's "cross features" (random pairwise crosses of categorical columns with a
  random seed as its only hyperparameter; no scikit-learn counterpart).

Bounds that keep one fit on 10k rows near or under the engine's 120 s limit (single thread):
forests 100 trees; AdaBoost 200 rounds of depth <= 8; HistGradientBoosting 200 iterations of at
most 511 leaves; kernel SVC/SVR ``max_iter=50000`` and fitted on at most 10,000 training rows
(``sklearn_models.RowCapped``: a class-stratified sample above that); kernel PCA at most 500 components (randomized
eigensolver on scikit-learn >= 1.0), fitted on at most 5,000 rows and transforming in chunks of as many
(``sklearn_models.RowCappedTransformer``); LightGBM's histogram cache at most 256 MB
(``sklearn_models.LIGHTGBM_HISTOGRAM_MB``); Nystroem / random kitchen sinks at most 500 components; random
trees embedding depth <= 6; polynomial terms of at most 25 features; ``n_jobs=1`` everywhere so
parallel evaluations do not oversubscribe the CPUs. A forest with ``max_features`` near 1 behind a
preprocessor that widens the data to hundreds of columns (polynomial, random trees embedding) can
still exceed the limit; the evaluator records such runs as failures. Regression forests have no
``criterion`` (friedman_mse is squared_error for forests, deprecated as such in scikit-learn 1.9).
LinearSVC and SVC have no cheap ``predict_proba``; the evaluator scores them by a sigmoid / softmax of
``decision_function``, as auto-sklearn's own SVCs do.

HistGradientBoosting (and the BLAS-backed decompositions) use all cores through OpenMP/BLAS
threads; on a busy machine that costs 10-50x, so evaluations should run under
``threadpoolctl.threadpool_limits(1)`` (or ``OMP_NUM_THREADS=1``).

Configurations that legitimately fail, as they do in auto-sklearn: kernel PCA whose sigmoid/poly
kernel matrix is not positive semi-definite (scikit-learn raises) or that removes every component;
QDA with a rank-deficient class covariance; FastICA or kernel SVC on unscaled data with huge values.
"""

from __future__ import annotations

from typing import Any, Dict

from optdiv.spaces import cs_compat as C
from optdiv.spaces import sklearn_models as sk
from optdiv.spaces.assembly import Component, Group, forbid_pair, selected
from optdiv.spaces.base import SearchSpace, check_task
from optdiv.spaces.value_shares import ValueShares, identifier_columns

_GAMMA = (3.0517578125e-05, 8.0)
_SVM_C = (0.03125, 32768.0)
_RF_TREES = 100
_HGB_ITER = 200
_SVM_MAX_ITER = 50000
_LINEAR_MAX_ITER = 1000
_MLP_MAX_ITER = 200
#: CatBoost's rounds at its defaults: half its own 1,000, with the learning rate it picks itself for that count
#: (on 5,000-row sets about as accurate as 1,000 rounds, in half the time: within a 180 s budget's per-evaluation
#: limit on a six-class set).
_CATBOOST_ROUNDS = 500

CLASSIFIERS = ("adaboost", "random_forest", "extra_trees", "gradient_boosting", "k_nearest_neighbors",
               "lda", "qda", "logistic_regression", "liblinear_svc", "libsvm_svc", "lightgbm")
REGRESSORS = ("extra_trees", "random_forest", "gradient_boosting", "k_nearest_neighbors", "lightgbm",
              "liblinear_svr", "libsvm_svr", "ridge")
RESCALERS = ("minmax", "normalizer", "quantile_transformer", "robust_scaler", "standardize", "none")
PREPROCESSORS_CLASSIFICATION = (
    "no_preprocessing", "fast_ica", "feature_agglomeration", "kernel_pca", "kitchen_sinks",
    "lda_decomposer", "nystroem_sampler", "pca", "polynomial", "random_trees_embedding", "truncatedSVD",
    "select_percentile_classification", "select_rates_classification",
    "extra_trees_preproc_for_classification", "liblinear_svc_preprocessor")
PREPROCESSORS_REGRESSION = (
    "no_preprocessing", "fast_ica", "feature_agglomeration", "kernel_pca", "kitchen_sinks",
    "nystroem_sampler", "pca", "polynomial", "random_trees_embedding", "truncatedSVD",
    "select_percentile_regression", "select_rates_regression", "extra_trees_preproc_for_regression")
_DENSE_ONLY_CLASSIFIERS = ("lda", "qda", "gradient_boosting")
_DENSE_ONLY_REGRESSORS = ("gradient_boosting",)


# =========================================================================== hyperparameters
def _forest(name, task, bootstrap_default):
    c = Component(name)
    if task == "classification":
        c.categorical("criterion", ["gini", "entropy"], "gini")
        c.float("max_features", 0.0, 1.0, 0.5)
    else:
        # no criterion: friedman_mse equals squared_error for forests (deprecated as such in
        # scikit-learn 1.9) and absolute_error is far too slow on 10k rows
        c.float("max_features", 0.0, 1.0, 1.0)
    c.int("min_samples_split", 2, 20, 2)
    c.int("min_samples_leaf", 1, 20, 1)
    c.categorical("bootstrap", ["True", "False"], bootstrap_default)
    return c


def _hist_gb():
    c = Component("gradient_boosting")
    c.float("learning_rate", 0.01, 1.0, 0.1, log=True)
    c.int("min_samples_leaf", 1, 200, 20, log=True)
    c.int("max_leaf_nodes", 3, 511, 31, log=True)
    c.float("l2_regularization", 1e-10, 1.0, 1e-10, log=True)
    c.categorical("early_stop", ["off", "valid", "train"], "off")
    c.int("n_iter_no_change", 1, 20, 10)
    c.float("validation_fraction", 0.01, 0.4, 0.1)
    c.only_if("n_iter_no_change", "early_stop", ["valid", "train"])
    c.only_if("validation_fraction", "early_stop", "valid")
    return c


def _knn():
    c = Component("k_nearest_neighbors")
    c.int("n_neighbors", 1, 100, 1, log=True)
    c.categorical("weights", ["uniform", "distance"], "uniform")
    return c


def _lightgbm():
    c = Component("lightgbm")
    c.int("n_estimators", 100, 1000, 500)
    c.int("num_leaves", 31, 2047, 128)
    c.float("learning_rate", 1e-3, 0.3, 0.1, log=True)
    c.int("min_child_samples", 5, 30, 20)
    c.float("subsample", 0.7, 1.0, 1.0)
    c.float("colsample_bytree", 0.7, 1.0, 1.0)
    return c


def _mlp():
    """A multi-layer perceptron: a smooth learner unlike every tree and kernel of the space, as an ensemble
    member; sklearn's defaults (one layer of 100 units, ReLU, Adam) as the space's default."""
    c = Component("mlp")
    c.int("hidden_layer_depth", 1, 3, 1)
    c.int("num_nodes_per_layer", 16, 256, 100, log=True)
    c.categorical("activation", ["relu", "tanh"], "relu")
    c.float("alpha", 1e-7, 1e-1, 1e-4, log=True)
    c.float("learning_rate_init", 1e-4, 0.5, 1e-3, log=True)
    c.categorical("early_stopping", ["valid", "train"], "train")
    return c


def _catboost():
    """CatBoost at its library's defaults only (a start-only model: the search never tunes it); symmetric trees
    with ordered boosting, a strong learner that errs unlike LightGBM's leaf-wise trees."""
    return Component("catboost")


def _liblinear_forbids(c):
    c.forbid(penalty="l1", loss="hinge")
    c.forbid(dual="False", penalty="l2", loss="hinge")
    c.forbid(dual="True", penalty="l1")


def _liblinear(name, penalty_default, dual_default):
    """LinearSVC's hyperparameters; the classifier and the L1 feature selector differ only in defaults."""
    c = Component(name)
    c.categorical("penalty", ["l1", "l2"], penalty_default)
    c.categorical("loss", ["hinge", "squared_hinge"], "squared_hinge")
    c.categorical("dual", ["True", "False"], dual_default)
    c.float("tol", 1e-5, 1e-1, 1e-4, log=True)
    c.float("C", *_SVM_C, default=1.0, log=True)
    _liblinear_forbids(c)
    return c


def _classifiers():
    out = []
    c = Component("adaboost")
    c.int("n_estimators", 50, 200, 50)
    c.float("learning_rate", 0.01, 2.0, 0.1, log=True)
    c.int("max_depth", 1, 8, 1)
    c.categorical("criterion", ["gini", "entropy"], "gini")
    out.append(c)
    out.append(_forest("random_forest", "classification", "True"))
    out.append(_forest("extra_trees", "classification", "False"))
    out.append(_hist_gb())
    out.append(_knn())
    c = Component("lda")
    c.categorical("shrinkage", ["None", "auto", "manual"], "None")
    c.float("shrinkage_factor", 0.0, 1.0, 0.5)
    c.float("tol", 1e-5, 1e-1, 1e-4, log=True)
    c.only_if("shrinkage_factor", "shrinkage", "manual")
    out.append(c)
    c = Component("qda")
    c.float("reg_param", 0.0, 1.0, 0.01)
    out.append(c)
    c = Component("logistic_regression")
    c.categorical("penalty", ["l1", "l2"], "l2")
    c.categorical("solver", ["liblinear", "saga"], "liblinear")
    c.float("C", 0.03125, 10.0, 1.0, log=True)
    c.float("tol", 1e-6, 1e-2, 1e-4, log=True)
    out.append(c)
    out.append(_liblinear("liblinear_svc", penalty_default="l2", dual_default="True"))
    c = Component("libsvm_svc")
    c.float("C", *_SVM_C, default=1.0, log=True)
    c.categorical("kernel", ["rbf", "poly", "sigmoid"], "rbf")
    c.int("degree", 2, 5, 3)
    c.float("gamma", *_GAMMA, default=0.1, log=True)
    c.float("coef0", -1.0, 1.0, 0.0)
    c.categorical("shrinking", ["True", "False"], "True")
    c.float("tol", 1e-5, 1e-1, 1e-3, log=True)
    c.only_if("degree", "kernel", "poly")
    c.only_if("coef0", "kernel", ["poly", "sigmoid"])
    out.append(c)
    out.append(_lightgbm())
    return out


def _regressors():
    out = [_forest("extra_trees", "regression", "False"), _forest("random_forest", "regression", "True"),
           _hist_gb(), _knn(), _lightgbm()]
    c = Component("liblinear_svr")
    c.categorical("loss", ["epsilon_insensitive", "squared_epsilon_insensitive"], "squared_epsilon_insensitive")
    c.float("epsilon", 0.001, 1.0, 0.1, log=True)
    c.float("tol", 1e-5, 1e-1, 1e-4, log=True)
    c.float("C", *_SVM_C, default=1.0, log=True)
    out.append(c)
    c = Component("libsvm_svr")
    c.categorical("kernel", ["linear", "poly", "rbf", "sigmoid"], "rbf")
    c.float("C", *_SVM_C, default=1.0, log=True)
    c.float("epsilon", 0.001, 1.0, 0.1, log=True)
    c.int("degree", 2, 5, 3)
    c.float("gamma", *_GAMMA, default=0.1, log=True)
    c.float("coef0", -1.0, 1.0, 0.0)
    c.categorical("shrinking", ["True", "False"], "True")
    c.float("tol", 1e-5, 1e-1, 1e-3, log=True)
    c.only_if("degree", "kernel", "poly")
    c.only_if("gamma", "kernel", ["poly", "rbf", "sigmoid"])
    c.only_if("coef0", "kernel", ["poly", "sigmoid"])
    out.append(c)
    c = Component("ridge")
    c.float("alpha", 1e-5, 10.0, 1.0, log=True)
    c.float("tol", 1e-5, 1e-1, 1e-3, log=True)
    out.append(c)
    return out


def _rescalers():
    out = [Component("minmax"), Component("normalizer")]
    c = Component("quantile_transformer")
    c.int("n_quantiles", 10, 2000, 1000)
    c.categorical("output_distribution", ["uniform", "normal"], "uniform")
    out.append(c)
    c = Component("robust_scaler")
    c.float("q_min", 0.001, 0.3, 0.25)
    c.float("q_max", 0.7, 0.999, 0.75)
    out.append(c)
    out += [Component("standardize"), Component("none")]
    return out


def _kernel_hps(c, kernels, gamma_kernels, gamma_default, n_components, log_components=False):
    c.categorical("kernel", kernels, "rbf")
    c.int("n_components", *n_components, log=log_components)
    c.float("gamma", *_GAMMA, default=gamma_default, log=True)
    c.int("degree", 2, 5, 3)
    c.float("coef0", -1.0, 1.0, 0.0)
    c.only_if("degree", "kernel", "poly")
    c.only_if("coef0", "kernel", ["poly", "sigmoid"])
    c.only_if("gamma", "kernel", gamma_kernels)


def _preprocessors(task):
    out = [Component("no_preprocessing")]
    c = Component("fast_ica")
    c.categorical("algorithm", ["parallel", "deflation"], "parallel")
    c.categorical("whiten", ["False", "True"], "False")
    c.categorical("fun", ["logcosh", "exp", "cube"], "logcosh")
    c.int("n_components", 10, 2000, 100)
    c.only_if("n_components", "whiten", "True")
    out.append(c)
    c = Component("feature_agglomeration")
    c.int("n_clusters", 2, 400, 25)
    c.categorical("metric", ["euclidean", "manhattan", "cosine"], "euclidean")
    c.categorical("linkage", ["ward", "complete", "average"], "ward")
    c.categorical("pooling_func", ["mean", "median", "max"], "mean")
    c.forbid(metric=["manhattan", "cosine"], linkage="ward")
    out.append(c)
    c = Component("kernel_pca")
    _kernel_hps(c, ["poly", "rbf", "sigmoid", "cosine"], ["poly", "rbf"], 1.0, (10, 500, 100))
    out.append(c)
    c = Component("kitchen_sinks")
    c.float("gamma", *_GAMMA, default=1.0, log=True)
    c.int("n_components", 50, 500, 100, log=True)
    out.append(c)
    if task == "classification":
        c = Component("lda_decomposer")
        c.categorical("shrinkage", ["None", "auto"], "None")
        out.append(c)
    c = Component("nystroem_sampler")
    _kernel_hps(c, ["poly", "rbf", "sigmoid", "cosine"], ["poly", "rbf", "sigmoid"], 0.1, (50, 500, 100),
                log_components=True)
    out.append(c)
    c = Component("pca")
    c.float("keep_variance", 0.5, 0.9999, 0.9999)
    c.categorical("whiten", ["False", "True"], "False")
    out.append(c)
    c = Component("polynomial")
    c.int("degree", 2, 3, 2)
    c.categorical("interaction_only", ["False", "True"], "False")
    out.append(c)
    c = Component("random_trees_embedding")
    c.int("n_estimators", 10, 100, 10)
    c.int("max_depth", 2, 6, 5)
    c.int("min_samples_split", 2, 20, 2)
    c.int("min_samples_leaf", 1, 20, 1)
    out.append(c)
    c = Component("truncatedSVD")
    c.int("target_dim", 10, 256, 128)
    out.append(c)
    if task == "classification":
        c = Component("select_percentile_classification")
        c.float("percentile", 1.0, 99.0, 50.0)
        c.categorical("score_func", ["chi2", "f_classif", "mutual_info"], "chi2")
        out.append(c)
        c = Component("select_rates_classification")
        c.float("alpha", 0.01, 0.5, 0.1)
        c.categorical("score_func", ["chi2", "f_classif"], "chi2")
        c.categorical("mode", ["fpr", "fdr", "fwe"], "fpr")
        out.append(c)
        c = _forest("extra_trees_preproc_for_classification", "classification", "False")
        out.append(c)
        out.append(_liblinear("liblinear_svc_preprocessor", penalty_default="l1", dual_default="False"))
    else:
        c = Component("select_percentile_regression")
        c.float("percentile", 1.0, 99.0, 50.0)
        c.categorical("score_func", ["f_regression", "mutual_info"], "f_regression")
        out.append(c)
        c = Component("select_rates_regression")
        c.float("alpha", 0.01, 0.5, 0.1)
        c.categorical("mode", ["fpr", "fdr", "fwe"], "fpr")
        out.append(c)
        out.append(_forest("extra_trees_preproc_for_regression", "regression", "False"))
    return out


# =========================================================================== builders
def _build_forest(task, kind, p, class_weight, seed):
    if task == "classification":
        cls = sk.RandomForestClassifier if kind == "random_forest" else sk.ExtraTreesClassifier
        extra = {"class_weight": class_weight}
    else:
        cls = sk.RandomForestRegressor if kind == "random_forest" else sk.ExtraTreesRegressor
        extra = {}
    if "criterion" in p:
        extra["criterion"] = p["criterion"]
    return cls(n_estimators=_RF_TREES, max_features=float(p["max_features"]),
               min_samples_split=int(p["min_samples_split"]), min_samples_leaf=int(p["min_samples_leaf"]),
               bootstrap=sk.bool_of(p["bootstrap"]), n_jobs=1, random_state=seed, **extra)


def _build_model(task, kind, p, class_weight, seed):
    if kind in ("random_forest", "extra_trees"):
        return _build_forest(task, kind, p, class_weight, seed)
    if kind == "gradient_boosting":
        return sk.hist_gradient_boosting(
            task, p["learning_rate"], p["min_samples_leaf"], p["max_leaf_nodes"], p["l2_regularization"],
            p["early_stop"], p.get("n_iter_no_change", 10), p.get("validation_fraction", 0.1),
            _HGB_ITER, class_weight, seed)
    if kind == "k_nearest_neighbors":
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

        cls = KNeighborsClassifier if task == "classification" else KNeighborsRegressor
        return cls(n_neighbors=int(p["n_neighbors"]), weights=p["weights"], p=2, n_jobs=1)
    if kind == "lightgbm":
        import lightgbm

        cls = lightgbm.LGBMClassifier if task == "classification" else lightgbm.LGBMRegressor
        extra = {"class_weight": class_weight} if task == "classification" else {}
        return cls(n_estimators=int(p["n_estimators"]), num_leaves=int(p["num_leaves"]), max_depth=15,
                   learning_rate=float(p["learning_rate"]), min_child_samples=int(p["min_child_samples"]),
                   subsample=float(p["subsample"]), subsample_freq=1,
                   colsample_bytree=float(p["colsample_bytree"]), random_state=seed, n_jobs=1,
                   histogram_pool_size=sk.LIGHTGBM_HISTOGRAM_MB, verbose=-1, **extra)
    if kind == "adaboost":
        from sklearn.tree import DecisionTreeClassifier

        base = DecisionTreeClassifier(max_depth=int(p["max_depth"]), criterion=p["criterion"],
                                      class_weight=class_weight, random_state=seed)
        return sk.adaboost_classifier(base, p["n_estimators"], p["learning_rate"], seed)
    if kind == "lda":
        from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

        if p["shrinkage"] == "None":
            return LinearDiscriminantAnalysis(solver="svd", tol=float(p["tol"]))
        shrinkage = "auto" if p["shrinkage"] == "auto" else float(p["shrinkage_factor"])
        return LinearDiscriminantAnalysis(solver="lsqr", shrinkage=shrinkage, tol=float(p["tol"]))
    if kind == "qda":
        from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

        return QuadraticDiscriminantAnalysis(reg_param=float(p["reg_param"]))
    if kind == "logistic_regression":
        return sk.logistic_regression(p["penalty"], p["C"], p["tol"], p["solver"], class_weight, seed,
                                      max_iter=_LINEAR_MAX_ITER)
    if kind == "liblinear_svc":
        from sklearn.svm import LinearSVC

        return LinearSVC(penalty=p["penalty"], loss=p["loss"], dual=sk.bool_of(p["dual"]), tol=float(p["tol"]),
                         C=float(p["C"]), class_weight=class_weight, random_state=seed,
                         max_iter=_LINEAR_MAX_ITER)
    if kind == "libsvm_svc":
        from sklearn.svm import SVC

        return sk.RowCapped(SVC(C=float(p["C"]), kernel=p["kernel"], degree=int(p.get("degree", 3)),
                                gamma=float(p["gamma"]), coef0=float(p.get("coef0", 0.0)),
                                shrinking=sk.bool_of(p["shrinking"]), tol=float(p["tol"]), max_iter=_SVM_MAX_ITER,
                                class_weight=class_weight, random_state=seed), random_state=seed)
    if kind == "liblinear_svr":
        from sklearn.svm import LinearSVR

        svr = LinearSVR(loss=p["loss"], epsilon=float(p["epsilon"]), tol=float(p["tol"]), C=float(p["C"]),
                        dual=p["loss"] == "epsilon_insensitive", max_iter=_LINEAR_MAX_ITER, random_state=seed)
        return _on_standardised_target(svr)
    if kind == "libsvm_svr":
        from sklearn.svm import SVR

        gamma = float(p["gamma"]) if "gamma" in p else "scale"
        svr = SVR(kernel=p["kernel"], C=float(p["C"]), epsilon=float(p["epsilon"]), degree=int(p.get("degree", 3)),
                  gamma=gamma, coef0=float(p.get("coef0", 0.0)), shrinking=sk.bool_of(p["shrinking"]),
                  tol=float(p["tol"]), max_iter=_SVM_MAX_ITER)
        return sk.RowCapped(_on_standardised_target(svr), random_state=seed)
    if kind == "mlp":
        return _build_mlp(task, p, seed)
    if kind == "catboost":
        return _build_catboost(task, class_weight, seed)
    if kind == "ridge":
        from sklearn.linear_model import Ridge

        return Ridge(alpha=float(p["alpha"]), tol=float(p["tol"]), random_state=seed)
    raise ValueError("unknown model %r" % kind)


def _build_mlp(task, p, seed):
    """The perceptron of :func:`_mlp`; a regressor learns the standardised target (its weights start small)."""
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    layers = (int(p["num_nodes_per_layer"]),) * int(p["hidden_layer_depth"])
    cls = MLPClassifier if task == "classification" else MLPRegressor
    net = cls(hidden_layer_sizes=layers, activation=p["activation"], alpha=float(p["alpha"]),
              learning_rate_init=float(p["learning_rate_init"]), early_stopping=p["early_stopping"] == "valid",
              max_iter=_MLP_MAX_ITER, random_state=seed)
    return net if task == "classification" else _on_standardised_target(net)


def _build_catboost(task, class_weight, seed):
    """CatBoost at its defaults but for :data:`_CATBOOST_ROUNDS`; one thread, and no files written."""
    try:
        import catboost
    except ImportError as error:
        raise ImportError("the catboost model needs the catboost package: pip install catboost") from error

    if task == "classification":
        weights = "Balanced" if class_weight == "balanced" else None
        return catboost.CatBoostClassifier(iterations=_CATBOOST_ROUNDS, auto_class_weights=weights, random_seed=seed,
                                           thread_count=1, verbose=False, allow_writing_files=False)
    return catboost.CatBoostRegressor(iterations=_CATBOOST_ROUNDS, random_seed=seed, thread_count=1, verbose=False,
                                      allow_writing_files=False)


def _on_standardised_target(regressor):
    """``regressor`` fitted on the standardised target and predicting on its scale: SVRs' epsilon and C, and a
    network's small initial weights, suit a target of unit scale."""
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.preprocessing import StandardScaler

    return TransformedTargetRegressor(regressor=regressor, transformer=StandardScaler())


def _build_rescaler(kind, p, seed):
    from sklearn import preprocessing as pre

    if kind == "minmax":
        return pre.MinMaxScaler()
    if kind == "normalizer":
        return pre.Normalizer()
    if kind == "quantile_transformer":
        return pre.QuantileTransformer(n_quantiles=int(p["n_quantiles"]),
                                       output_distribution=p["output_distribution"], random_state=seed)
    if kind == "robust_scaler":
        return pre.RobustScaler(quantile_range=(100.0 * float(p["q_min"]), 100.0 * float(p["q_max"])))
    if kind == "standardize":
        return pre.StandardScaler()
    if kind == "none":
        return "passthrough"
    raise ValueError("unknown rescaler %r" % kind)


def _build_preprocessor(task, kind, p, seed):
    if kind == "no_preprocessing":
        return "passthrough"
    if kind == "fast_ica":
        return sk.fast_ica(p.get("n_components", 100), p["algorithm"], sk.bool_of(p["whiten"]), p["fun"], seed)
    if kind == "feature_agglomeration":
        return sk.feature_agglomeration(p["n_clusters"], p["metric"], p["linkage"], p["pooling_func"])
    if kind == "kernel_pca":
        return sk.kernel_pca(p["n_components"], p["kernel"], p.get("gamma"), p.get("degree", 3),
                             p.get("coef0", 0.0), seed)
    if kind == "kitchen_sinks":
        from sklearn.kernel_approximation import RBFSampler

        return RBFSampler(gamma=float(p["gamma"]), n_components=int(p["n_components"]), random_state=seed)
    if kind == "lda_decomposer":
        from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

        if p["shrinkage"] == "None":
            return LinearDiscriminantAnalysis(solver="svd")
        return LinearDiscriminantAnalysis(solver="eigen", shrinkage="auto")
    if kind == "nystroem_sampler":
        from sklearn.kernel_approximation import Nystroem

        return Nystroem(kernel=p["kernel"], n_components=int(p["n_components"]), gamma=p.get("gamma"),
                        degree=int(p.get("degree", 3)), coef0=float(p.get("coef0", 0.0)), random_state=seed)
    if kind == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=float(p["keep_variance"]), whiten=sk.bool_of(p["whiten"]), svd_solver="full",
                   random_state=seed)
    if kind == "polynomial":
        return sk.PolynomialInteractions(degree=int(p["degree"]), interaction_only=sk.bool_of(p["interaction_only"]),
                                         task=task)
    if kind == "random_trees_embedding":
        from sklearn.ensemble import RandomTreesEmbedding

        return RandomTreesEmbedding(n_estimators=int(p["n_estimators"]), max_depth=int(p["max_depth"]),
                                    min_samples_split=int(p["min_samples_split"]),
                                    min_samples_leaf=int(p["min_samples_leaf"]), sparse_output=True,
                                    n_jobs=1, random_state=seed)
    if kind == "truncatedSVD":
        return sk.ClampedTruncatedSVD(n_components=int(p["target_dim"]), algorithm="randomized", random_state=seed)
    if kind.startswith("select_percentile"):
        return sk.SafeSelectPercentile(score_func=sk.score_function(p["score_func"], task, seed),
                                       percentile=float(p["percentile"]))
    if kind.startswith("select_rates"):
        score = p.get("score_func", "f_regression")
        return sk.SafeGenericUnivariateSelect(score_func=sk.score_function(score, task, seed),
                                              mode=p["mode"], param=float(p["alpha"]))
    if kind.startswith("extra_trees_preproc"):
        from sklearn.feature_selection import SelectFromModel

        forest = _build_forest(task, "extra_trees", p, None, seed)
        return SelectFromModel(forest, threshold="mean")
    if kind == "liblinear_svc_preprocessor":
        from sklearn.feature_selection import SelectFromModel
        from sklearn.svm import LinearSVC

        svc = LinearSVC(penalty=p["penalty"], loss=p["loss"], dual=sk.bool_of(p["dual"]), tol=float(p["tol"]),
                        C=float(p["C"]), random_state=seed, max_iter=_LINEAR_MAX_ITER)
        return SelectFromModel(svc, threshold="mean")
    raise ValueError("unknown feature preprocessor %r" % kind)


# =========================================================================== the space
#: The switch that appends identifier-like columns' value shares (:mod:`optdiv.spaces.value_shares`).
VALUE_SHARES = "value_shares:strategy"


#: The space's name with the multi-layer perceptron among its models (``space="autosklearn+mlp"``).
WITH_MLP = "autosklearn+mlp"
#: The space's name with the perceptron evaluated once, at its defaults, and never tuned by the search.
WITH_DEFAULT_MLP = "autosklearn+defaultmlp"
#: The space's name with CatBoost evaluated once, at its defaults, and never tuned by the search.
WITH_DEFAULT_CATBOOST = "autosklearn+defaultcatboost"
#: What each space name adds to the base space: its perceptron (False: none, True: searched, "default": start
#: list only) and whether CatBoost is offered at its defaults from the start list.
_VARIANTS = {"autosklearn": (False, False), WITH_MLP: (True, False), WITH_DEFAULT_MLP: ("default", False),
             WITH_DEFAULT_CATBOOST: (False, True)}


def autosklearn_space(task: str = "classification", value_shares: bool = True, mlp=False,
                      catboost: bool = False) -> SearchSpace:
    """DivBO's auto-sklearn-style space for ``task`` ("classification" or "regression"); ``value_shares=False``
    leaves out the value-shares switch (for data where no column qualifies, :func:`for_columns`); ``mlp=True``
    adds scikit-learn's multi-layer perceptron as one more model (the space named :data:`WITH_MLP`), and
    ``mlp="default"`` adds it as a start-only model (:data:`WITH_DEFAULT_MLP`): the start list evaluates it at its
    defaults, and the search spends no evaluation tuning it. ``catboost=True`` adds CatBoost the same way, at its
    defaults from the start list only (:data:`WITH_DEFAULT_CATBOOST`; needs the ``catboost`` package)."""
    check_task(task)
    if mlp not in (False, True, "default"):
        raise ValueError("mlp must be False, True or 'default'; got %r" % (mlp,))
    variant = (mlp, bool(catboost))
    if variant not in _VARIANTS.values():
        raise ValueError("no built-in space holds both the perceptron and CatBoost")
    space = C.new_space(name="optdiv-autosklearn-%s" % task)
    extra = ([_mlp()] if mlp else []) + ([_catboost()] if catboost else [])
    if task == "classification":
        model = Group("classifier", _classifiers() + extra, "random_forest")
        dense_only = _DENSE_ONLY_CLASSIFIERS
    else:
        model = Group("regressor", _regressors() + extra, "random_forest")
        dense_only = _DENSE_ONLY_REGRESSORS
    dense_only += ("catboost",) if catboost else ()
    pre = Group("feature_preprocessor", _preprocessors(task), "no_preprocessing")
    rescaling = Group("rescaling", _rescalers(), "standardize")
    for group in (model, rescaling, pre):
        group.add_to(space)
    balancing = None
    if task == "classification":
        balancing = C.categorical("balancing:strategy", ["none", "weighting"], "none")
        C.add_hyperparameters(space, [balancing])
    if value_shares:
        C.add_hyperparameters(space, [C.categorical(VALUE_SHARES, ["off", "on"], "off")])
    forbid_pair(space, pre, ["random_trees_embedding"], model, dense_only)
    name = {v: k for k, v in _VARIANTS.items()}[variant]
    start_only = (["mlp"] if mlp == "default" else []) + (["catboost"] if catboost else [])
    return SearchSpace(name, task, space, AutoSklearnBuilder(task), algorithm_key=model.choice_name,
                       start_only=start_only)


def for_columns(space: SearchSpace, X) -> SearchSpace:
    """``space`` without its value-shares switch when no column of ``X`` (the search's training rows as the
    pipelines receive them) qualifies: there "on" builds the same model as "off", and a search left to set it
    spends evaluations on copies of models it has already scored. Any other space is returned unchanged."""
    if space.name not in _VARIANTS or VALUE_SHARES not in space.hyperparameter_names or identifier_columns(X):
        return space
    return named_space(space.name, space.task, value_shares=False)


def named_space(name: str, task: str, value_shares: bool = True) -> SearchSpace:
    """The built-in variant of the space called ``name`` (a key of :data:`_VARIANTS`) for ``task``."""
    mlp, catboost = _VARIANTS[name]
    return autosklearn_space(task, value_shares=value_shares, mlp=mlp, catboost=catboost)


class AutoSklearnBuilder:
    """``builder(config, seed)`` of :func:`autosklearn_space` (a picklable callable)."""

    def __init__(self, task: str):
        self.task = check_task(task)

    def __call__(self, config: Dict[str, Any], seed: int):
        from sklearn.pipeline import Pipeline

        model_group = "classifier" if self.task == "classification" else "regressor"
        kind, p = selected(config, model_group)
        class_weight = "balanced" if config.get("balancing:strategy") == "weighting" else None
        rescaler_kind, rp = selected(config, "rescaling")
        pre_kind, pp = selected(config, "feature_preprocessor")
        shares = ValueShares() if config.get(VALUE_SHARES) == "on" else "passthrough"
        return Pipeline([
            ("value_shares", shares),
            ("rescaling", _build_rescaler(rescaler_kind, rp, seed)),
            ("feature_preprocessor", _build_preprocessor(self.task, pre_kind, pp, seed)),
            (model_group, _build_model(self.task, kind, p, class_weight, seed)),
        ])

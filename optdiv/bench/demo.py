"""The README's first command: the core on scikit-learn's bundled breast_cancer data, no download.

It fits a small library of different models, then compares the single best model with ensembles
built by Caruana selection and by Agnostic Bayes over the library's validation predictions, and
shows how diverse (in OptDivBO's sense) the selected members are compared with the whole library.
"""

from __future__ import annotations

import time
from typing import Dict, List, Tuple

import numpy as np

from optdiv.core.diversity import pairwise_diversity
from optdiv.core.ensemble import agnostic_bayes_weights, ensemble_predict, ensemble_selection
from optdiv.core.metrics import mean_loss, per_example_loss


def _library(seed: int) -> List[Tuple[str, object]]:
    from sklearn.ensemble import ExtraTreesClassifier, GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    models: List[Tuple[str, object]] = []
    for c in (0.01, 1.0, 100.0):
        models.append((f"logreg(C={c})", make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))))
    for k in (3, 15, 45):
        models.append((f"knn(k={k})", make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=k))))
    for depth in (2, 5, None):
        models.append((f"tree(depth={depth})", DecisionTreeClassifier(max_depth=depth, random_state=seed)))
    models.append(("random_forest", RandomForestClassifier(n_estimators=100, random_state=seed)))
    models.append(("extra_trees", ExtraTreesClassifier(n_estimators=100, random_state=seed)))
    models.append(("grad_boosting", GradientBoostingClassifier(random_state=seed)))
    models.append(("gaussian_nb", GaussianNB()))
    return models


def run_demo(seed: int = 0) -> Dict[str, object]:
    """Fit the library, build both ensembles, return the test errors and diversity summary."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    start = time.perf_counter()
    x, y = load_breast_cancer(return_X_y=True)
    x_rest, x_test, y_rest, y_test = train_test_split(x, y, test_size=0.2, stratify=y, random_state=seed)
    x_train, x_val, y_train, y_val = train_test_split(
        x_rest, y_rest, test_size=0.25, stratify=y_rest, random_state=seed
    )  # 60/20/20 as in the papers
    names, val_preds, test_preds = [], [], []
    for name, model in _library(seed):
        model.fit(x_train, y_train)
        names.append(name)
        val_preds.append(model.predict_proba(x_val))
        test_preds.append(model.predict_proba(x_test))
    val = np.asarray(val_preds, dtype=np.float32)
    test = np.asarray(test_preds, dtype=np.float32)

    val_errors = mean_loss(val, y_val, "error")
    best = int(np.argmin(val_errors))
    caruana = ensemble_selection(val, y_val, "log_loss", size=25, seed=seed)
    bayes = agnostic_bayes_weights(per_example_loss(val, y_val, "log_loss").T, n_samples=1000, seed=seed)
    optdiv = pairwise_diversity(val, y_val, "zero_one", ensemble_size=25)
    members = np.flatnonzero(caruana.weights)
    off_diagonal = ~np.eye(len(names), dtype=bool)
    chosen_pairs = off_diagonal[np.ix_(members, members)]
    return {
        "models": names,
        "best_single": names[best],
        "test_error_best_single": float(mean_loss(test[best], y_test, "error")),
        "test_error_caruana": float(mean_loss(ensemble_predict(test, caruana.weights), y_test, "error")),
        "test_error_agnostic_bayes": float(mean_loss(ensemble_predict(test, bayes), y_test, "error")),
        "caruana_members": {names[i]: float(caruana.weights[i]) for i in members},
        "agnostic_bayes_top": {names[i]: float(bayes[i]) for i in np.argsort(-bayes)[:3]},
        "optdiv_mean_all_pairs": float(optdiv[off_diagonal].mean()),
        "optdiv_mean_ensemble_pairs": float(optdiv[np.ix_(members, members)][chosen_pairs].mean())
        if chosen_pairs.any()
        else float("nan"),
        "seconds": time.perf_counter() - start,
    }


def format_demo(result: Dict[str, object]) -> str:
    lines = [
        "optdiv demo: breast_cancer (scikit-learn bundled), 60/20/20 split, "
        f"{len(result['models'])} models in the library",
        f"  best single model ({result['best_single']}): test error {100 * result['test_error_best_single']:.2f}%",
        f"  Caruana ensemble selection (25 rounds):      test error {100 * result['test_error_caruana']:.2f}%",
        f"  Agnostic Bayes (bootstrap, 1000 samples):    test error {100 * result['test_error_agnostic_bayes']:.2f}%",
        "  Caruana members: " + ", ".join(f"{k} x{v:.2f}" for k, v in result["caruana_members"].items()),
        "  Agnostic Bayes top weights: " + ", ".join(f"{k} {v:.2f}" for k, v in result["agnostic_bayes_top"].items()),
        "  OptDiv (0.2 CE + 0.1 Brier; lower = more useful diversity): "
        f"all pairs {result['optdiv_mean_all_pairs']:.4f}, ensemble pairs {result['optdiv_mean_ensemble_pairs']:.4f}",
        f"  done in {result['seconds']:.1f} s",
    ]
    return "\n".join(lines)

"""OpenBox + optdiv quickstart: your own scikit-learn model space on breast_cancer, 40 iterations.

Runs OpenBox's ``Optimizer`` twice with the same space, seed and budget, once plain and once with the
OptDivBO option, builds each run's final ensemble over the validation predictions, refits the members on the
training and validation rows and prints the ensembles' test accuracy side by side.

    python examples/openbox_quickstart.py          # needs openbox==0.9.0 (pip install -e .[openbox])
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from ConfigSpace import (
    CategoricalHyperparameter,
    ConfigurationSpace,
    EqualsCondition,
    UniformFloatHyperparameter,
    UniformIntegerHyperparameter,
)
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from optdiv.integrations.openbox import OptDivOptimizer, final_ensemble

ITERATIONS = 40
SEED = 0

X, y = load_breast_cancer(return_X_y=True)
X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.2, random_state=SEED, stratify=y)
X_train, X_val, y_train, y_val = train_test_split(X_rest, y_rest, test_size=0.25, random_state=SEED, stratify=y_rest)
X_all, y_all = np.vstack([X_train, X_val]), np.concatenate([y_train, y_val])  # what the final members are refitted on


def make_space() -> ConfigurationSpace:
    """Four model families; each hyperparameter is active only for its own family."""
    cs = ConfigurationSpace(seed=SEED)
    model = CategoricalHyperparameter("model", ["knn", "logreg", "random_forest", "extra_trees"])
    k = UniformIntegerHyperparameter("n_neighbors", 1, 50, log=True)
    C = UniformFloatHyperparameter("C", 1e-4, 1e3, log=True)
    depth = UniformIntegerHyperparameter("max_depth", 1, 20)
    features = UniformFloatHyperparameter("max_features", 0.05, 1.0)
    cs.add_hyperparameters([model, k, C, depth, features])
    cs.add_conditions([
        EqualsCondition(k, model, "knn"),
        EqualsCondition(C, model, "logreg"),
        EqualsCondition(depth, model, "random_forest"),
        EqualsCondition(features, model, "extra_trees"),
    ])
    return cs


def build(values: dict):
    name = values["model"]
    if name == "knn":
        return make_pipeline(StandardScaler(), KNeighborsClassifier(values["n_neighbors"]))
    if name == "logreg":
        return make_pipeline(StandardScaler(), LogisticRegression(C=values["C"], max_iter=500))
    if name == "random_forest":
        return RandomForestClassifier(100, max_depth=values["max_depth"], random_state=SEED)
    return ExtraTreesClassifier(100, max_features=values["max_features"], random_state=SEED)


def objective(config) -> dict:
    """Validation error, with the validation probabilities for the ensemble and the diversity option."""
    model = build(config.get_dictionary()).fit(X_train, y_train)
    proba = model.predict_proba(X_val)
    error = float(np.mean(proba.argmax(axis=1) != y_val))
    return {"objectives": [error], "extra_info": {"val_pred": proba}}


def ensemble_test_accuracy(optimizer) -> float:
    """optdiv's final model over the run's history: its ensemble selection, the members refitted on the training
    and validation rows together."""
    members = final_ensemble(optimizer.config_advisor, y_val=y_val)
    model = members.refit(lambda config: build(config.get_dictionary()).fit(X_all, y_all))
    return float(np.mean(model.predict(X_test) == y_test))


def run(optdiv):
    optimizer = OptDivOptimizer(
        objective, make_space(), max_runs=ITERATIONS, initial_runs=5, surrogate_type="prf",
        random_state=SEED, logging_dir=os.path.join(tempfile.gettempdir(), "openbox_quickstart"),
        task_id="openbox_quickstart",
        optdiv=optdiv,  # the one extra argument: None is plain OpenBox
    )
    optimizer.run()
    return optimizer


if __name__ == "__main__":
    # method=None keeps OpenBox's own suggestions and only stores the predictions for the ensemble
    plain = run({"y_val": y_val, "method": None})
    optdiv = run({"y_val": y_val, "metric": "error", "method": "optdivbo"})
    changed = sum(s["changed"] for s in optdiv.config_advisor.selections)
    print(f"plain OpenBox + final model:       test accuracy {ensemble_test_accuracy(plain):.4f}")
    print(f"OpenBox + OptDivBO + final model:  test accuracy {ensemble_test_accuracy(optdiv):.4f} "
          f"({changed} of {ITERATIONS} suggestions changed by diversity)")

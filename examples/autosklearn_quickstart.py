"""auto-sklearn as it ships, with OptDivBO choosing its Bayesian-optimisation suggestions.

Run in the auto-sklearn environment (Python 3.9, ``pip install auto-sklearn==0.15.0``):

    python examples/autosklearn_quickstart.py

Two minutes of search on scikit-learn's bundled breast_cancer data, then the test accuracy of
auto-sklearn's own final ensemble and how many suggestions the diversity ranking made.
"""

from __future__ import annotations

import numpy as np
from autosklearn.classification import AutoSklearnClassifier
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from optdiv.integrations.autosklearn import ensemble_members, optdiv_smac


def main() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)

    callback = optdiv_smac(method="optdivbo")  # or "divbo"; leave the keyword out for stock auto-sklearn
    automl = AutoSklearnClassifier(
        time_left_for_this_task=120,
        per_run_time_limit=15,
        memory_limit=4096,
        n_jobs=1,
        seed=1,
        ensemble_kwargs={"ensemble_size": 25},
        get_smac_object_callback=callback,  # the one keyword that switches optdiv on
    )
    automl.fit(X_train, y_train, dataset_name="breast_cancer")

    accuracy = float(np.mean(automl.predict(X_test) == y_test))
    report = callback.report
    print(f"test accuracy: {accuracy:.4f}")
    print(f"diversity-ranked suggestions: {report.n_diversity_ranked} of {report.n_calls} model-based ones "
          f"({report.n_changed} differ from plain EI); {len(automl.cv_results_['status'])} runs in all")
    print("auto-sklearn's final ensemble:")
    for member in ensemble_members(automl):
        print(f"  run {member['model_id']:>3}  weight {member['weight']:.2f}  {member['type']:<22} "
              f"validation loss {member['cost']:.4f}")


if __name__ == "__main__":
    main()

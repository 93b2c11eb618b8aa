"""auto-sklearn 0.15.0 itself works: a 30-second fit on breast_cancer."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.timeout(300)
def test_autosklearn_classifier_fits_breast_cancer(tmp_path):
    from autosklearn.classification import AutoSklearnClassifier
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=0, stratify=y
    )
    automl = AutoSklearnClassifier(
        time_left_for_this_task=30,
        per_run_time_limit=10,
        memory_limit=3072,
        n_jobs=1,
        seed=1,
        tmp_folder=str(tmp_path / "autosklearn_tmp"),  # must not exist yet
        delete_tmp_folder_after_terminate=True,
    )
    automl.fit(X_train, y_train, dataset_name="breast_cancer")

    statuses = list(automl.cv_results_["status"])
    assert len(statuses) > 0, "auto-sklearn evaluated no configuration"
    assert "Success" in statuses, f"no successful run: {statuses}"
    assert len(automl.leaderboard()) > 0
    accuracy = float(np.mean(automl.predict(X_test) == y_test))
    assert accuracy > 0.85, f"test accuracy {accuracy:.3f}"

"""AutoGluon's own fit, then OptDivBO adds good and different models in the time AutoGluon leaves.

Run with AutoGluon-Tabular installed (``pip install "autogluon.tabular[lightgbm]"``):

    python examples/autogluon_quickstart.py

About two minutes (the time limit) on scikit-learn's bundled breast_cancer data.
"""

from __future__ import annotations

import tempfile

from autogluon.tabular import TabularPredictor
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from optdiv.integrations.autogluon import fit


def main() -> None:
    data = load_breast_cancer(as_frame=True).frame  # 30 features + "target"
    rest, test = train_test_split(data, test_size=0.2, random_state=0, stratify=data["target"])
    train, val = train_test_split(rest, test_size=0.25, random_state=0, stratify=rest["target"])

    with tempfile.TemporaryDirectory() as folder:
        predictor = TabularPredictor(label="target", eval_metric="accuracy", path=folder, verbosity=0)
        # was: predictor.fit(train, tuning_data=val, time_limit=120)
        search = fit(predictor, train, tuning_data=val, time_limit=120,
                     method="optdivbo",  # or "divbo", "bo", "rs"
                     callback=lambda t: print(f"  {t.index:2d} {t.family:3s} {t.model or '-':22s} {t.status:7s} "
                                              f"val acc {t.score_val:.4f}"))
        print(search)
        print(f"AutoGluon's own fit: {len(search.phase1_models)} models in {search.phase1_seconds:.0f} s; "
              f"validation scores {search.scores}")
        print(predictor.leaderboard(test)[["model", "score_test", "score_val"]].head(8).to_string(index=False))
        accuracy = (predictor.predict(test) == test["target"]).mean()
        refit = "refitted on train+validation" if search.refitted else "not refitted"
        print(f"final predictor ({predictor.model_best}, {refit}): test accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()

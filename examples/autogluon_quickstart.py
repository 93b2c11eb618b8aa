"""OptDivBO chooses which models AutoGluon trains; AutoGluon trains and ensembles them.

Run with AutoGluon-Tabular installed (``pip install "autogluon.tabular[lightgbm]"``):

    python examples/autogluon_quickstart.py

About two to three minutes on two cores: 20 suggestions on scikit-learn's bundled breast_cancer data.
"""

from __future__ import annotations

import tempfile

from autogluon.tabular import TabularPredictor
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from optdiv.integrations import autogluon as optdiv_ag


def main() -> None:
    data = load_breast_cancer(as_frame=True).frame  # 30 features + "target"
    rest, test = train_test_split(data, test_size=0.2, random_state=0, stratify=data["target"])
    train, val = train_test_split(rest, test_size=0.25, random_state=0, stratify=rest["target"])

    with tempfile.TemporaryDirectory() as folder:
        predictor = TabularPredictor(label="target", eval_metric="accuracy", path=folder, verbosity=0)
        search = optdiv_ag.fit(
            predictor, train, tuning_data=val,
            method="optdivbo",        # or "divbo", "bo", "rs"
            n_models=20,              # suggestions; time_limit=... bounds the wall time instead / as well
            model_time_limit=20,      # cap on one model's training
            callback=lambda t: print(f"  {t.index:2d} {t.family:3s} {t.model or '-':22s} {t.status:6s} "
                                     f"val acc {t.score_val:.4f}"),
        )
        print(search)
        print(predictor.leaderboard(test)[["model", "score_test", "score_val"]].head(8).to_string(index=False))
        accuracy = (predictor.predict(test) == test["target"]).mean()
        print(f"final predictor ({predictor.model_best}): test accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()

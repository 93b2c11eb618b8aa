"""The AutoGluon-Tabular 1.6.3 internals the hook and the HPO searcher rely on, checked when a fit or a searcher
starts: a changed host raises :class:`HostVersionError` naming what differs, instead of searching in AutoGluon's
own order unnoticed."""

from __future__ import annotations

import inspect
from typing import Dict, List, Optional, Tuple

from optdiv.integrations.host_check import Problems, covers, parameters, raise_on

WRITTEN_FOR = "AutoGluon-Tabular 1.6.3"

#: AutoGluon's model class of each family (``model_info(...)["model_type"]`` names the class).
MODEL_CLASSES = {"GBM": "LGBModel", "CAT": "CatBoostModel", "XGB": "XGBoostModel", "RF": "RFModel",
                 "XT": "XTModel", "KNN": "KNNModel", "LR": "LinearModel"}
#: AutoGluon's post-fit steps: the hook runs them once at the end (on the final ensemble), not after phase 1.
POST_FIT = ("refit_full", "set_best_to_refit_full", "keep_only_best", "save_space", "calibrate",
            "calibrate_decision_threshold")


class HostVersionError(RuntimeError):
    """AutoGluon differs from the version the adapter was written for in something it relies on."""


def _signature_problem(cls, needs: Dict[str, Tuple[str, ...]]) -> Optional[str]:
    """The first method of ``needs`` (name -> parameters it must take) that ``cls`` lacks or takes otherwise."""
    for name, params in needs.items():
        method = getattr(cls, name, None)
        if method is None:
            return "%s has no %s" % (cls.__name__, name)
        found = covers(parameters(method), params)
        if found:
            return "%s.%s: %s" % (cls.__name__, name, found)
    return None


def _hook_problems() -> List[str]:
    """Every internal the hook relies on that is missing or has another signature (empty: all as expected)."""
    problems = Problems()

    def predictor():
        from autogluon.tabular import TabularPredictor as P

        needs = {
            "fit": ("train_data", "tuning_data", "time_limit", "presets", "hyperparameters", "fit_weighted_ensemble",
                    "calibrate_decision_threshold", "num_cpus", "num_gpus", "fit_strategy"),
            "fit_extra": ("hyperparameters", "time_limit", "fit_weighted_ensemble", "num_cpus", "num_gpus"),
            "predict_proba_multi": ("data", "models", "as_pandas", "as_multiclass", "inverse_transform"),
            "predict_multi": ("data", "models", "as_pandas", "inverse_transform"),
            "load_data_internal": ("data", "return_X", "return_y"),
            "fit_weighted_ensemble": ("base_models", "name_suffix", "time_limit", "num_cpus", "num_gpus"),
            "set_model_best": ("model", "save_trainer"),
            "model_hyperparameters": ("model", "include_ag_args_ensemble", "output_format"),
            "model_info": ("model",), "leaderboard": (), "model_failures": (), "model_names": ("stack_name",),
            "_post_fit": POST_FIT + ("infer_limit", "num_cpus", "num_gpus", "fit_strategy",
                                      "raise_on_no_models_fitted"),
        }
        return _signature_problem(P, needs)

    def fit_extra_keywords():
        from autogluon.tabular import TabularPredictor as P

        from types import SimpleNamespace

        keys = P._fit_extra_kwargs_dict(SimpleNamespace(verbosity=0))  # it reads nothing else of the predictor
        return covers(keys, ("ag_args", "ag_args_fit", "calibrate", "refit_full", "set_best_to_refit_full",
                               "keep_only_best", "save_space", "raise_on_no_models_fitted", "name_suffix"))

    def presets():
        from autogluon.common.utils.decorators import _apply_presets
        from autogluon.tabular.configs.presets_configs import tabular_presets_alias, tabular_presets_dict

        found = covers(parameters(_apply_presets), ("preset_dict", "presets_alias"))
        if found:
            return "_apply_presets: " + found
        if not isinstance(tabular_presets_dict, dict) or not isinstance(tabular_presets_alias, dict):
            return "tabular_presets_dict / tabular_presets_alias are not dicts"
        return None

    def model_classes():
        import autogluon.tabular.models as models

        wrong = [key for key, cls in MODEL_CLASSES.items()
                 if getattr(getattr(models, cls, None), "ag_key", None) != key]
        return None if not wrong else "model classes of %s are gone or renamed" % ", ".join(wrong)

    def scoring():
        from autogluon.core.metrics import Scorer, compute_metric
        from autogluon.core.utils import get_pred_from_proba

        found = (covers(parameters(compute_metric), ("y", "metric", "y_pred", "y_pred_proba", "as_error"))
                 or covers(parameters(get_pred_from_proba), ("y_pred_proba", "problem_type")))
        if found:
            return found
        missing = [name for name in ("needs_pred", "needs_quantile") if not hasattr(Scorer, name)]
        return None if not missing else "Scorer has no %s" % ", ".join(missing)

    problems.check("autogluon.tabular.TabularPredictor methods", predictor)
    problems.check("scoring predictions (autogluon.core.metrics.compute_metric, get_pred_from_proba)", scoring)
    problems.check("TabularPredictor._fit_extra_kwargs_dict", fit_extra_keywords)
    problems.check("preset resolution (autogluon.common.utils.decorators)", presets)
    problems.check("autogluon.tabular.models (family of a trained model)", model_classes)
    return problems


def _searcher_problems() -> List[str]:
    """Every internal the HPO searcher relies on that is missing or has another signature."""
    problems = Problems()

    def factory():
        import importlib

        module = importlib.import_module("autogluon.core.searcher.searcher_factory")
        configs = getattr(module, "SEARCHER_CONFIGS", None)
        if not isinstance(configs, dict):
            return "no module-level SEARCHER_CONFIGS dict"
        if not all("searcher_cls" in c for c in configs.values()):
            return "SEARCHER_CONFIGS entries no longer hold searcher_cls"
        return None

    def searcher():
        from autogluon.common import space
        from autogluon.core.searcher.local_random_searcher import LocalRandomSearcher as S

        found = _signature_problem(S, {"get_config": (), "update": ("config",), "evaluation_failed": ("config",),
                                       "configure_scheduler": ("scheduler",), "_pickle_config": ("config",),
                                       "_add_result": ("config", "result"), "_reward_while_pending": ()})
        if found:
            return found
        probe = S(search_space={"x": space.Real(0.0, 1.0)}, reward_attribute="reward")
        gone = [a for a in ("search_space", "_results", "_params_space", "_params_static", "random_state",
                            "_reward_attribute") if not hasattr(probe, a)]
        return None if not gone else "LocalRandomSearcher instances lack %s" % ", ".join(gone)

    def trial_layout():
        from autogluon.core.models.abstract import model_trial

        if "T{task_id + 1}" not in inspect.getsource(model_trial.init_model):
            return "model_trial.init_model no longer saves trial models under T<trial + 1>"
        return None

    def bagged():
        from autogluon.core.models import BaggedEnsembleModel

        method = getattr(BaggedEnsembleModel, "load_oof", None)
        return "no load_oof" if method is None else covers(parameters(method), ("path",))

    problems.check("autogluon.core.searcher.searcher_factory", factory)
    problems.check("autogluon.core.searcher.LocalRandomSearcher (the searcher subclasses it)", searcher)
    problems.check("trial model path layout (autogluon.core.models.abstract.model_trial)", trial_layout)
    problems.check("BaggedEnsembleModel (out-of-fold predictions of bagged trials)", bagged)
    return problems


def check_host(searcher: bool = False) -> None:
    """Raise :class:`HostVersionError` unless every AutoGluon internal the hook (``searcher=True``: the HPO
    searcher) relies on is there with the expected signature. Called when a fit or a searcher starts."""
    what = "searcher" if searcher else "hook"
    raise_on(_searcher_problems() if searcher else _hook_problems(), HostVersionError, f"AutoGluon {what}",
             WRITTEN_FOR, [("autogluon.tabular", "AutoGluon-Tabular")],
             f'Install {WRITTEN_FOR} (pip install "autogluon.tabular==1.6.3"), or fit without optdiv.')

"""The auto-sklearn and SMAC internals the adapter relies on, checked when auto-sklearn builds SMAC through the
callback: an incompatible host raises :class:`HostVersionError` and stops the fit at its start, instead of
searching in SMAC's own order unnoticed."""

from __future__ import annotations

from typing import Dict, List, Optional

from optdiv.integrations.host_check import Problems, covers, parameters, raise_on, refers_to, same

#: The host versions this adapter was written and tested for.
WRITTEN_FOR = "auto-sklearn 0.15.0 with SMAC 1.2"


class HostVersionError(RuntimeError):
    """auto-sklearn or SMAC differ from the versions the adapter was written for in something it relies on."""


#: ``autosklearn.smbo.get_smac_object``'s parameters, in order: ``OptDivSMAC.__call__`` mirrors that function.
_GET_SMAC_OBJECT = ("scenario_dict", "seed", "ta", "ta_kwargs", "metalearning_configurations", "n_jobs",
                    "dask_client", "multi_objective_algorithm", "multi_objective_kwargs")
_SMAC4AC_KEYWORDS = ("scenario", "rng", "runhistory2epm", "tae_runner", "tae_runner_kwargs",
                     "initial_configurations", "run_id", "intensifier", "dask_client", "n_jobs",
                     "multi_objective_algorithm", "multi_objective_kwargs", "acquisition_function_optimizer",
                     "acquisition_function_optimizer_kwargs")
_MAXIMIZER_INIT = ("self", "acquisition_function", "config_space", "rng", "max_steps", "n_steps_plateau_walk",
                   "n_sls_iterations")
_BACKEND_METHODS = {"get_numrun_directory": ("seed", "num_run", "budget"),
                    "get_prediction_filename": ("subset", "automl_seed", "idx", "budget"),
                    "load_targets_ensemble": (), "load_datamanager": ()}


def host_problems(backend=None, ta_kwargs=None) -> List[str]:
    """Every relied-on host internal that is missing or has another signature (empty: all as expected)."""
    problems = Problems()
    if ta_kwargs is not None:
        missing = [key for key in ("backend", "metrics") if key not in ta_kwargs]
        if missing:
            problems.append(f"the callback's ta_kwargs: missing {', '.join(missing)}")

    def get_smac_object():
        from autosklearn.smbo import get_smac_object

        return same(parameters(get_smac_object), _GET_SMAC_OBJECT)

    def smac4ac():
        from smac.facade.smac_ac_facade import SMAC4AC

        return covers(parameters(SMAC4AC.__init__), _SMAC4AC_KEYWORDS)

    def maximizer():
        from smac.optimizer.ei_optimization import AcquisitionFunctionMaximizer, LocalAndSortedRandomSearch

        if "_maximize" not in vars(LocalAndSortedRandomSearch):
            return "LocalAndSortedRandomSearch defines no _maximize of its own"
        if not refers_to(AcquisitionFunctionMaximizer.maximize, "_maximize"):
            return "AcquisitionFunctionMaximizer.maximize no longer calls _maximize"
        return (same(parameters(LocalAndSortedRandomSearch.__init__), _MAXIMIZER_INIT)
                or same(parameters(LocalAndSortedRandomSearch._maximize),
                        ("self", "runhistory", "stats", "num_points")))

    def status_type():
        from smac.tae import StatusType

        return covers([s.name for s in StatusType], ("SUCCESS", "DONOTADVANCE", "RUNNING"))

    def run_history():
        from smac.runhistory.runhistory import RunHistory, RunKey, RunValue

        rh = RunHistory()
        found = covers([n for n in ("data", "ids_config", "config_ids", "get_all_configs") if hasattr(rh, n)],
                       ("data", "ids_config", "config_ids", "get_all_configs"))
        return (found or covers(RunKey._fields, ("config_id", "budget"))
                or covers(RunValue._fields, ("status", "additional_info")))

    def backend_methods():
        if backend is None:
            from autosklearn.automl_common.common.utils.backend import Backend as owner
        else:
            owner = backend
        for name, params in _BACKEND_METHODS.items():
            method = getattr(owner, name, None)
            if method is None:
                return f"no {name}"
            actual = [p for p in parameters(method) if p != "self"]
            if tuple(actual) != params:
                return f"{name}{tuple(actual)}, expected {name}{params}"
        return None

    def loss():
        from autosklearn.metrics import calculate_loss

        return covers(parameters(calculate_loss)[:4], ("solution", "prediction", "task_type", "metric"))

    def task_constants():
        import autosklearn.constants as constants

        names = ("BINARY_CLASSIFICATION", "MULTICLASS_CLASSIFICATION", "MULTILABEL_CLASSIFICATION", "REGRESSION",
                 "MULTIOUTPUT_REGRESSION")
        return covers([n for n in names if hasattr(constants, n)], names)

    def ensemble_api():
        from autosklearn.ensembles.abstract_ensemble import AbstractEnsemble
        from autosklearn.estimators import AutoSklearnEstimator

        if not hasattr(AutoSklearnEstimator, "_resolve_ensemble_class"):
            return "AutoSklearnEstimator has no _resolve_ensemble_class (the estimators pick the default with it)"
        return (same(parameters(AbstractEnsemble.fit),
                     ("self", "base_models_predictions", "true_targets", "model_identifiers", "runs", "X_data"))
                or covers(parameters(AbstractEnsemble.__init__), ("task_type", "metrics", "backend", "random_state")))

    problems.check("autosklearn.smbo.get_smac_object (the callback mirrors it)", get_smac_object)
    problems.check("auto-sklearn's ensemble_class API (OptDivEnsemble implements it)", ensemble_api)
    problems.check("smac SMAC4AC keywords", smac4ac)
    problems.check("smac LocalAndSortedRandomSearch (the maximiser subclasses it)", maximizer)
    problems.check("smac StatusType", status_type)
    problems.check("smac RunHistory / RunKey / RunValue", run_history)
    problems.check("auto-sklearn backend (run folders, prediction files, targets)", backend_methods)
    problems.check("autosklearn.metrics.calculate_loss", loss)
    problems.check("autosklearn.constants task types", task_constants)
    return problems


def check_host(backend=None, ta_kwargs: Optional[Dict] = None) -> None:
    """Raise :class:`HostVersionError` unless every auto-sklearn / SMAC internal the adapter relies on is there
    with the expected signature (``backend``, ``ta_kwargs``: also check what auto-sklearn handed the callback).
    Called when SMAC is built, so an incompatible host stops the fit at its start instead of searching in
    SMAC's order unnoticed."""
    raise_on(host_problems(backend, ta_kwargs), HostVersionError, "auto-sklearn adapter", WRITTEN_FOR,
             [("autosklearn", "auto-sklearn"), ("smac", "SMAC")],
             f"Install {WRITTEN_FOR} (pip install auto-sklearn==0.15.0), or fit without optdiv.")

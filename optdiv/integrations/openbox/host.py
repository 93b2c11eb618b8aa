"""The OpenBox 0.9 internals the adapter relies on, checked when an advisor or optimizer with the option on is built
(or loaded): a changed OpenBox raises :class:`HostVersionError` naming each difference, instead of searching in
OpenBox's own order unnoticed."""

from __future__ import annotations

from typing import List, Optional

from openbox.core.async_batch_advisor import AsyncBatchAdvisor
from openbox.core.generic_advisor import Advisor
from openbox.core.sync_batch_advisor import SyncBatchAdvisor
from openbox.optimizer.generic_smbo import SMBO
from openbox.optimizer.parallel_smbo import pSMBO

from optdiv.integrations.host_check import Problems, covers, installed, parameters, raise_on, refers_to, same

#: OpenBox batch strategies under which every slot goes through the re-ranked candidate list.
BATCH_STRATEGIES = ("default", "median_imputation")

#: The host version this adapter was written and tested for.
WRITTEN_FOR = "OpenBox 0.9.0"


class HostVersionError(RuntimeError):
    """OpenBox differs from the version the adapter was written for in something the option relies on."""


#: Arguments the optimizers hand to the advisors they build (OpenBox's own factory passes the same).
_ADVISOR_KEYWORDS = ("num_objectives", "num_constraints", "initial_trials", "initial_configurations",
                     "init_strategy", "transfer_learning_history", "rand_prob", "optimization_strategy",
                     "surrogate_type", "acq_type", "acq_optimizer_type", "ref_point", "early_stop",
                     "early_stop_kwargs", "output_dir", "task_id", "random_state", "logger_kwargs")
#: ``Optimizer`` (SMBO) arguments :class:`OptDivOptimizer` reads.
_SMBO_KEYWORDS = ("num_objectives", "num_constraints", "sample_strategy", "advisor_type", "surrogate_type",
                  "acq_type", "acq_optimizer_type", "initial_runs", "init_strategy", "initial_configurations",
                  "ref_point", "transfer_learning_history", "early_stop", "early_stop_kwargs", "logging_dir",
                  "task_id", "visualization", "auto_open_html", "random_state", "advisor_kwargs",
                  "scheduler_type")
#: ``ParallelOptimizer`` (pSMBO) arguments :class:`OptDivParallelOptimizer` reads.
_PSMBO_KEYWORDS = ("num_objectives", "num_constraints", "parallel_strategy", "sample_strategy", "batch_size",
                   "batch_strategy", "surrogate_type", "acq_type", "acq_optimizer_type", "initial_runs",
                   "init_strategy", "initial_configurations", "ref_point", "transfer_learning_history",
                   "logging_dir", "task_id", "random_state", "advisor_kwargs")
_OBSERVATION_FIELDS = ("config", "objectives", "constraints", "trial_state", "extra_info")


def host_problems() -> List[str]:
    """Every relied-on OpenBox internal that is missing or has another signature (empty: all as expected)."""
    problems = Problems()

    def calls(owner, method: str, *names: str) -> Optional[str]:
        function = vars(owner).get(method)
        if function is None:
            return f"{owner.__name__} defines no {method} of its own"
        missing = [name for name in names if not refers_to(function, name, in_constants=True)]
        return None if not missing else f"{owner.__name__}.{method} no longer uses {', '.join(missing)}"

    def candidates():
        # the hook: the one method that returns OpenBox's candidate list, fed by the acquisition maximiser
        return (same(parameters(Advisor._get_bo_candidates), ("self", "history"))
                or calls(Advisor, "_get_bo_candidates", "maximize", "config_to_original"))

    def suggestions():
        return (calls(Advisor, "get_suggestion", "_get_bo_candidates")
                or calls(Advisor, "get_suggestions", "_get_bo_candidates")
                or same(parameters(Advisor.get_suggestions), ("self", "batch_size", "history"))
                or covers(parameters(Advisor.update_observation), ("self", "observation"))
                or covers(parameters(Advisor.__init__), _ADVISOR_KEYWORDS))

    def acquisition():
        from openbox.acq_optimizer.basic_maximizer import AcquisitionFunctionMaximizer

        return covers(parameters(AcquisitionFunctionMaximizer.maximize)[:4],
                      ("self", "acquisition_function", "history", "num_points"))

    def sync_batch():
        return (same(parameters(SyncBatchAdvisor.get_suggestions), ("self", "batch_size", "history"))
                or calls(SyncBatchAdvisor, "get_suggestions", "_get_bo_candidates", "get_suggestion",
                         *BATCH_STRATEGIES)
                or covers(parameters(SyncBatchAdvisor.__init__), ("batch_size", "batch_strategy")))

    def async_batch():
        return (calls(AsyncBatchAdvisor, "get_suggestion", "_get_suggestion", "running_configs")
                or calls(AsyncBatchAdvisor, "_get_suggestion", "_get_bo_candidates", "get_suggestion",
                         *BATCH_STRATEGIES)
                or calls(AsyncBatchAdvisor, "update_observation", "running_configs")
                or covers(parameters(AsyncBatchAdvisor.__init__), ("batch_size", "batch_strategy")))

    def history():
        from openbox.utils.history import History, Observation

        found = covers([n for n in ("configurations", "get_success_count", "get_objectives")
                        if hasattr(History, n)], ("configurations", "get_success_count", "get_objectives"))
        return (found or covers(parameters(Observation.__init__), _OBSERVATION_FIELDS)
                or covers(parameters(History.__init__), ("num_constraints",)))

    def optimizers():
        return (covers(parameters(SMBO.__init__), _SMBO_KEYWORDS)
                or covers(parameters(pSMBO.__init__), _PSMBO_KEYWORDS)
                or calls(pSMBO, "sync_run", "get_suggestions", "update_observation")
                or calls(pSMBO, "async_run", "get_suggestion", "running_configs"))

    problems.check("openbox Advisor._get_bo_candidates (the candidate list the option re-orders)", candidates)
    problems.check("openbox Advisor suggestion methods", suggestions)
    problems.check("openbox acquisition maximiser", acquisition)
    problems.check("openbox SyncBatchAdvisor", sync_batch)
    problems.check("openbox AsyncBatchAdvisor", async_batch)
    problems.check("openbox History / Observation", history)
    problems.check("openbox Optimizer / ParallelOptimizer", optimizers)
    return problems


#: The package whose version the errors name, as (import name, label).
_PACKAGES = [("openbox", "openbox")]


def check_host() -> None:
    """Raise :class:`HostVersionError` unless every OpenBox internal the option relies on is there with the
    expected signature. Called when an advisor or optimizer with the option on is built, so a changed
    OpenBox stops the search at its start instead of searching in OpenBox's own order unnoticed."""
    raise_on(host_problems(), HostVersionError, "OpenBox adapter", WRITTEN_FOR, _PACKAGES,
             f"Install {WRITTEN_FOR} (pip install openbox==0.9.0), or run with method=None.")


def changed_host_error(what: str) -> HostVersionError:
    """The error for an OpenBox that, at run time, stops doing what the option relies on."""
    return HostVersionError(f"optdiv's OpenBox adapter was written for {WRITTEN_FOR}: {what} "
                            f"({installed(*_PACKAGES)}). Install {WRITTEN_FOR}, or run with method=None.")


"""OpenBox adapter: optdiv's final model over the history of OpenBox 0.9's own advisors and optimizers, and DivBO /
OptDivBO as an option of their search.

Everything of OpenBox stays: its space (``openbox.space.Space`` or ConfigSpace), initial design, surrogate
(PRF or GP), EI (constrained EI with constraints), acquisition maximiser, random interleaving
(``rand_prob``), batch strategies, history and the ask/tell, ``Optimizer`` and ``ParallelOptimizer`` loops.
By default the advisor only keeps each trial's validation predictions for :func:`final_ensemble` (the diversity
re-ranking was measured level with OpenBox's own search once both end with optdiv's final model). With
``method="optdivbo"`` (or ``"divbo"``) it changes one step: OpenBox's maximiser returns its candidate list (about
5,000 configurations sorted by EI); the advisor re-orders that list with the core's
:class:`~optdiv.core.selector.DiversityAwareSelector` (EI rank + w(t) * diversity rank) before OpenBox
takes the first configuration it has not evaluated yet::

    from openbox import Observation
    from optdiv.integrations.openbox import OptDivAdvisor, final_ensemble

    advisor = OptDivAdvisor(space, y_val=y_val, metric="error", method="optdivbo", random_state=0)
    for _ in range(40):
        config = advisor.get_suggestion()
        loss, val_proba = fit_and_score(config)          # your code: (rows, classes) probabilities
        advisor.update_observation(Observation(config, [loss], extra_info={"val_pred": val_proba}))
    members = final_ensemble(advisor)                     # the engine's ensemble selection over the history
    model = members.refit(fit_on_all_rows)                # your code: config -> model fitted on train + validation

With OpenBox's ``Optimizer`` the objective returns ``{"objectives": [loss], "extra_info": {"val_pred": p}}``
and :class:`OptDivOptimizer` takes one extra argument, ``optdiv=dict(y_val=y_val, metric="error")``;
:class:`OptDivParallelOptimizer` does the same for ``ParallelOptimizer`` (sync and async).

Parallel batches: a suggestion made while other configurations are in flight (the earlier slots of a
batch, or the trials still running in async mode) treats them as pending observations whose validation
predictions are *believed* (:func:`optdiv.core.believers.believed_predictions`, the rule the engine and the
auto-sklearn adapter use), so the slots of a batch cover different behaviour. OpenBox's batch strategy
still sets the performance side of each slot: ``"default"`` ranks every slot from one candidate list,
``"median_imputation"`` refits the surrogate with the median loss imputed for the configurations in flight.

Where the validation predictions live: :meth:`OptDivAdvisor.update_observation` moves the array out of
``extra_info`` into the advisor's own store and leaves the integer marker ``extra_info["optdiv_pred"]``
in its place, so OpenBox's ``History.save_json`` keeps working and stays small. Failed trials (any
``trial_state`` other than SUCCESS, or predictions with NaN/inf, which are recorded as FAILED like the
engine's failed runs) keep OpenBox's handling for the surrogate (the worst observed loss) and never
enter the pool or the final ensemble; nor do infeasible trials (a constraint value above 0).

``method=None`` switches the option off: the advisor then suggests exactly what the OpenBox advisor it
extends suggests with the same arguments (predictions are still kept, for :func:`final_ensemble`).

Differences from the papers, where OpenBox sets the terms (see docs/openbox.md): the candidates and
EI are OpenBox's; OpenBox's initial design (``initial_trials``, default 3) and ``rand_prob`` (0.1, only
in ``get_suggestion``; OpenBox's ``Optimizer`` calls ``get_suggestions``, which has none) replace the
papers' five random suggestions and 20% random picks.

Written against OpenBox 0.9.0 with ConfigSpace 0.6.1; OpenBox is imported when this module is. The
OpenBox internals the option relies on are checked when an advisor with the option on is built
(:func:`check_host`): a changed OpenBox raises :class:`HostVersionError` instead of searching in OpenBox's
own order unnoticed.
"""

from optdiv.integrations.openbox.advisor import (MARKER_KEY, PRED_KEY, OptDivAdvisor, OptDivAsyncBatchAdvisor,
                                                 OptDivSyncBatchAdvisor, encode_configurations)
from optdiv.integrations.openbox.ensemble import EnsembleMembers, FittedEnsemble, final_ensemble
from optdiv.integrations.openbox.host import WRITTEN_FOR, HostVersionError, check_host, host_problems
from optdiv.integrations.openbox.optimizers import OptDivOptimizer, OptDivParallelOptimizer

__all__ = [
    "OptDivAdvisor",
    "OptDivSyncBatchAdvisor",
    "OptDivAsyncBatchAdvisor",
    "OptDivOptimizer",
    "OptDivParallelOptimizer",
    "EnsembleMembers",
    "FittedEnsemble",
    "HostVersionError",
    "WRITTEN_FOR",
    "check_host",
    "host_problems",
    "final_ensemble",
    "encode_configurations",
    "PRED_KEY",
    "MARKER_KEY",
]

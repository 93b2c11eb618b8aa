"""OpenBox's ``Optimizer`` and ``ParallelOptimizer`` with one extra argument, ``optdiv``, which puts an advisor of
:mod:`optdiv.integrations.openbox.advisor` in the place of the one OpenBox built (OpenBox is not patched)."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Mapping

from openbox.optimizer.generic_smbo import SMBO
from openbox.optimizer.parallel_smbo import pSMBO

from optdiv.integrations.openbox.advisor import OptDivAdvisor, OptDivAsyncBatchAdvisor, OptDivSyncBatchAdvisor
from optdiv.integrations.openbox.host import check_host


def _arguments(function, *args, **kwargs) -> Dict[str, Any]:
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _advisor_from(optdiv, cls, advisor_kwargs: Mapping, build: Callable[..., OptDivAdvisor]) -> OptDivAdvisor:
    """The advisor an optimizer's ``optdiv`` argument names: an advisor as it is, or ``build(**options)``."""
    if isinstance(optdiv, OptDivAdvisor):
        if type(optdiv) is not cls:
            raise TypeError(f"this loop needs an {cls.__name__}; got an {type(optdiv).__name__}")
        if optdiv.method is not None:
            check_host()
        return optdiv
    if isinstance(optdiv, Mapping):
        options = dict(optdiv)
        clash = sorted(set(options) & set(advisor_kwargs or {}))
        if clash:
            raise ValueError(f"{', '.join(clash)} given both in optdiv and in advisor_kwargs")
        return build(**dict(advisor_kwargs or {}), **options)
    raise TypeError(f"optdiv must be None, a mapping of {cls.__name__} options or an {cls.__name__}; "
                    f"got {type(optdiv).__name__}")


def _refuse_unless(a: Mapping, wants, loop: str) -> None:
    """Refuse optimizer arguments ``a`` unless each (name, value) of ``wants`` holds: the option runs on ``loop``."""
    problems = [f"{name}={a[name]!r} (needs {want!r})" for name, want in wants if a[name] != want]
    if problems:
        raise ValueError(f"the optdiv option runs on {loop}; got " + ", ".join(problems))


def _install_advisor(optimizer, optdiv, cls, advisor_kwargs: Mapping, build: Callable[..., OptDivAdvisor]) -> None:
    """Put the advisor ``optdiv`` names (:func:`_advisor_from`) in the place of the one OpenBox built; a given
    advisor's loop continues after its history."""
    advisor = _advisor_from(optdiv, cls, advisor_kwargs, build)
    if advisor is optdiv:
        optimizer.iteration_id = len(advisor.history)
    optimizer.config_advisor = advisor


def _advisor_arguments(a: dict) -> dict:
    """The advisor arguments that OpenBox's ``Optimizer`` and ``ParallelOptimizer`` both derive from
    their own (``a``: the optimizer's bound arguments), under the advisor's names."""
    return dict(
        num_objectives=a["num_objectives"],
        num_constraints=a["num_constraints"],
        initial_trials=a["initial_runs"],
        init_strategy=a["init_strategy"],
        initial_configurations=a["initial_configurations"],
        transfer_learning_history=a["transfer_learning_history"],
        optimization_strategy=a["sample_strategy"],
        surrogate_type=a["surrogate_type"],
        acq_type=a["acq_type"],
        acq_optimizer_type=a["acq_optimizer_type"],
        ref_point=a["ref_point"],
        output_dir=a["logging_dir"],
        task_id=a["task_id"],
        random_state=a["random_state"],
        logger_kwargs={"force_init": False},  # the optimizer already set OpenBox's logger up
    )


class OptDivOptimizer(SMBO):
    """OpenBox's ``Optimizer`` (``SMBO``) with one extra argument, ``optdiv``.

    ``optdiv=None`` is OpenBox's own ``Optimizer``, untouched. A mapping holds the
    :class:`OptDivAdvisor` options (``y_val``, ``metric``, ``method``, ``selector_options``, ...); the
    advisor gets every other argument exactly as OpenBox's would (``initial_runs``, ``surrogate_type``,
    ``num_constraints``, ``random_state``, ``advisor_kwargs``, ...). An :class:`OptDivAdvisor` (e.g. from
    :meth:`OptDivAdvisor.load`) is used as it is and the loop continues after its history, so
    ``max_runs`` counts the trials already made.

    OpenBox 0.9's ``Optimizer`` builds its advisor from a fixed list of names, so the advisor is
    swapped in after OpenBox built its default one (no patching of OpenBox).
    """

    def __init__(self, objective_function, config_space, optdiv=None, **kwargs):
        super().__init__(objective_function, config_space, **kwargs)
        if optdiv is None:
            return
        a = _arguments(SMBO.__init__, self, objective_function, config_space, **kwargs)
        _refuse_unless(a, (("advisor_type", "default"), ("scheduler_type", "full"), ("num_objectives", 1),
                           ("sample_strategy", "bo")), "OpenBox's default single-objective BO loop")

        def build(**options):
            return OptDivAdvisor(
                config_space, **_advisor_arguments(a),
                early_stop=a["early_stop"], early_stop_kwargs=a["early_stop_kwargs"], **options,
            )

        _install_advisor(self, optdiv, OptDivAdvisor, a["advisor_kwargs"], build)
        from openbox.visualization import build_visualizer

        self.visualizer = build_visualizer(
            option=a["visualization"], history=self.get_history(), logging_dir=self.output_dir,
            optimizer=self, advisor=None, auto_open_html=a["auto_open_html"],
        )
        self.visualizer.setup()


class OptDivParallelOptimizer(pSMBO):
    """OpenBox's ``ParallelOptimizer`` (``pSMBO``) with one extra argument, ``optdiv``.

    ``optdiv=None`` is OpenBox's own ``ParallelOptimizer``, untouched. A mapping holds the
    :class:`OptDivAdvisor` options; the advisor (:class:`OptDivSyncBatchAdvisor` for
    ``parallel_strategy="sync"``, :class:`OptDivAsyncBatchAdvisor` for ``"async"``) gets every other
    argument exactly as OpenBox's would (``batch_size``, ``batch_strategy``, ``initial_runs``,
    ``num_constraints``, ``random_state``, ``advisor_kwargs``, ...). An advisor of that class is used as it
    is. The objective returns ``{"objectives": [loss], "extra_info": {"val_pred": p}}`` (plus
    ``"constraints"``), and must be picklable: OpenBox evaluates it in worker processes.
    """

    def __init__(self, objective_function, config_space, optdiv=None, **kwargs):
        super().__init__(objective_function, config_space, **kwargs)
        if optdiv is None:
            return
        a = _arguments(pSMBO.__init__, self, objective_function, config_space, **kwargs)
        _refuse_unless(a, (("num_objectives", 1), ("sample_strategy", "bo")),
                       "OpenBox's single-objective BO batch advisors")
        cls = OptDivSyncBatchAdvisor if a["parallel_strategy"] == "sync" else OptDivAsyncBatchAdvisor

        def build(**options):
            return cls(
                config_space, **_advisor_arguments(a),
                batch_size=a["batch_size"], batch_strategy=a["batch_strategy"], **options,
            )

        _install_advisor(self, optdiv, cls, a["advisor_kwargs"], build)

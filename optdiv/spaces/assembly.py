"""Helpers to assemble choice-structured ConfigSpace spaces (auto-sklearn style names).

A *group* is a top-level categorical ``"<group>:__choice__"``; each choice is a *component*
whose hyperparameters are named ``"<group>:<component>:<hp>"`` and are active only while the
choice selects the component. Component-internal conditions (e.g. ``gamma`` only for some
kernels) are kept; such children hang off their in-component parent only.
"""

from __future__ import annotations

from typing import Any, Dict, List

from optdiv.spaces import cs_compat as C


class Component:
    """Hyperparameters, internal conditions and forbidden clauses of one choice."""

    def __init__(self, name: str):
        self.name = name
        self.hps: List[Any] = []
        self.conditions: List[Any] = []
        self.children: set = set()
        self.forbiddens: List[Any] = []
        self._by_name: Dict[str, Any] = {}

    # hyperparameters are given with local names; the group prefix is added in ``Group.add_to``
    def categorical(self, name, choices, default=None):
        return self._add(C.categorical(name, choices, default))

    def float(self, name, lower, upper, default=None, log=False):
        return self._add(C.uniform_float(name, lower, upper, default, log))

    def int(self, name, lower, upper, default=None, log=False):
        return self._add(C.uniform_int(name, lower, upper, default, log))

    def only_if(self, child: str, parent: str, values):
        """``child`` is active only while ``parent`` takes one of ``values``."""
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        self.conditions.append((child, parent, values))
        self.children.add(child)

    def forbid(self, **assignment):
        """Forbid the combination ``{hp: value or [values]}`` inside this component."""
        self.forbiddens.append(dict(assignment))

    def _add(self, hp):
        self.hps.append(hp)
        self._by_name[hp.name] = hp
        return hp


def _renamed(hp, name):
    """A copy of ``hp`` under a new name (constructors are the same in every ConfigSpace version)."""
    if C.is_categorical(hp):
        return C.categorical(name, C.choices_of(hp), hp.default_value)
    log = bool(getattr(hp, "log", False))
    if type(hp).__name__ == "UniformIntegerHyperparameter":
        return C.uniform_int(name, hp.lower, hp.upper, hp.default_value, log)
    return C.uniform_float(name, hp.lower, hp.upper, hp.default_value, log)


class Group:
    """A top-level choice among components."""

    def __init__(self, name: str, components: List[Component], default: str):
        self.name = name
        self.components = components
        self.default = default
        self.choice = None
        self.hp: Dict[str, Any] = {}  # full name -> hyperparameter

    def full(self, component: str, hp: str) -> str:
        return "%s:%s:%s" % (self.name, component, hp)

    @property
    def choice_name(self) -> str:
        return "%s:__choice__" % self.name

    def add_to(self, space) -> None:
        self.choice = C.categorical(self.choice_name, [c.name for c in self.components], self.default)
        hps, conditions, forbiddens = [self.choice], [], []
        for comp in self.components:
            local = {}
            for hp in comp.hps:
                renamed = _renamed(hp, self.full(comp.name, hp.name))
                local[hp.name] = renamed
                self.hp[renamed.name] = renamed
                hps.append(renamed)
            for hp in comp.hps:
                if hp.name not in comp.children:
                    conditions.append(C.equals(local[hp.name], self.choice, comp.name))
            for child, parent, values in comp.conditions:
                if len(values) == 1:
                    conditions.append(C.equals(local[child], local[parent], values[0]))
                else:
                    conditions.append(C.in_condition(local[child], local[parent], values))
            for assignment in comp.forbiddens:
                clauses = []
                for hp_name, value in assignment.items():
                    if isinstance(value, (list, tuple)):
                        clauses.append(C.forbidden_in(local[hp_name], value))
                    else:
                        clauses.append(C.forbidden_equals(local[hp_name], value))
                forbiddens.append(C.forbidden_and(*clauses) if len(clauses) > 1 else clauses[0])
        C.add_hyperparameters(space, hps)
        C.add_conditions(space, conditions)
        C.add_forbiddens(space, forbiddens)


def selected(config: Dict[str, Any], group: str):
    """(chosen component, its hyperparameters under their local names) of ``group`` in ``config``."""
    comp = config["%s:__choice__" % group]
    prefix = "%s:%s:" % (group, comp)
    return comp, {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


def forbid_pair(space, group_a: Group, values_a, group_b: Group, values_b) -> None:
    """Forbid choosing any of ``values_a`` in ``group_a`` together with any of ``values_b`` in ``group_b``."""
    C.add_forbiddens(space, [C.forbidden_and(C.forbidden_in(group_a.choice, list(values_a)),
                                             C.forbidden_in(group_b.choice, list(values_b)))])

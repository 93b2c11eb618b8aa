"""The one ConfigSpace encoder: bit-identical to a value-by-value reference, on whichever ConfigSpace is installed."""

import math

import numpy as np
import pytest
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    OrdinalHyperparameter,
    UnParametrizedHyperparameter,
)

from optdiv.spaces import cs_compat as C
from optdiv.spaces import SearchSpace
from optdiv.spaces.encoding import ConfigEncoder, choice_count


def _space():
    """Float, log-float, int, log-int, categorical, ordinal, constants and two conditional hyperparameters."""
    cs = C.new_space(seed=0)
    algo = C.categorical("algo", ["a", "b", "c"])
    only_b = C.uniform_float("b_rate", 0.0, 1.0)
    not_b = C.categorical("ac_kind", ["p", "q"])
    C.add_hyperparameters(cs, [
        algo, C.uniform_float("f", -2.0, 3.0), C.uniform_float("lf", 1e-4, 10.0, log=True), C.uniform_int("i", 1, 9),
        C.uniform_int("li", 2, 500, log=True), OrdinalHyperparameter("ord", ["lo", "mid", "hi", "top"]),
        C.constant("const", "x"), UnParametrizedHyperparameter("unp", 7), C.categorical("one", ["only"]),
        only_b, not_b,
    ])
    C.add_conditions(cs, [C.equals(only_b, algo, "b"), C.in_condition(not_b, algo, ["a", "c"])])
    return cs


def _reference(config, names) -> list:
    """Today's encoding written out per value: ConfigSpace's vector value, index / (k - 1) for a choice,
    0 for a constant, -1 for an inactive hyperparameter, clipped to [0, 1]."""
    space = C.space_of(config)
    vector = config.get_array()
    order = C.hyperparameter_names(space)
    row = []
    for name in names:
        hp = C.get_hyperparameter(space, name)
        x = float(vector[order.index(name)])
        if math.isnan(x):
            row.append(-1.0)
            continue
        if isinstance(hp, (CategoricalHyperparameter, OrdinalHyperparameter, Constant)):
            k = len(C.choices_of(hp))
            x = x / (k - 1) if k > 1 else 0.0
        row.append(min(max(x, 0.0), 1.0))
    return row


def test_matches_the_reference_bit_for_bit():
    cs = _space()
    configs = C.sample_configurations(cs, 400, seed=3) + [C.default_configuration(cs)]
    for names in (None, sorted(C.hyperparameter_names(cs))):
        encoder = ConfigEncoder(cs, names)
        expected = np.array([_reference(c, encoder.names) for c in configs], dtype=np.float64)
        encoded = encoder.encode(configs)
        assert encoded.dtype == np.float64 and encoded.tobytes() == expected.tobytes()
        assert encoder.encode_vectors(encoder.vectors(configs)).tobytes() == expected.tobytes()
        # dicts of active values are encoded value by value: as the Configurations rebuilt from them (a
        # value's vector may differ from the sampled vector it was decoded from in the last bit)
        dicts = [C.config_to_dict(c) for c in configs]
        rebuilt = [C.make_configuration(cs, d) for d in dicts]
        assert encoder.encode(dicts).tobytes() == encoder.encode(rebuilt).tobytes()
        np.testing.assert_allclose(encoder.encode(dicts), expected, rtol=0, atol=1e-8)


def test_values_mean_what_the_convention_says():
    cs = _space()
    encoder = ConfigEncoder(cs)
    col = encoder.column
    config = C.make_configuration(cs, {"algo": "c", "f": 0.5, "lf": 10 ** -1.5, "i": 5, "li": 2, "ord": "hi",
                                       "const": "x", "unp": 7, "one": "only", "ac_kind": "q"})
    row = encoder.encode(config)[0]  # one configuration: a one-row matrix
    assert row[col("algo")] == 1.0 and row[col("ac_kind")] == 1.0 and row[col("ord")] == pytest.approx(2 / 3)
    assert row[col("const")] == row[col("unp")] == row[col("one")] == 0.0  # whatever the version's vector
    assert row[col("b_rate")] == -1.0  # inactive
    assert row[col("f")] == pytest.approx(0.5, abs=1e-9)
    assert row[col("lf")] == pytest.approx(0.5, abs=1e-9)  # log scale: 10^-1.5 is the middle of [1e-4, 10]
    assert row[col("i")] == pytest.approx(0.5, abs=1e-9) and 0.0 <= row[col("li")] < 0.06  # 0.x widens ints by 0.5
    assert encoder.choice_indices(encoder.encode([config]), "algo").tolist() == [2]
    assert [choice_count(C.get_hyperparameter(cs, n)) for n in ("algo", "ord", "const", "unp", "f")] == [3, 4, 1, 1, 0]


def test_vectors_outside_the_unit_interval_are_clipped_and_nan_is_inactive():
    encoder = ConfigEncoder(_space())
    vectors = np.full((2, encoder.vector_width), 0.5)
    vectors[0, :] = 7.0
    vectors[1, :] = -3.0
    vectors[1, encoder.column("f")] = np.nan
    x = encoder.encode_vectors(vectors)
    assert np.all((x[0] >= 0) & (x[0] <= 1)) and x[1, encoder.column("f")] == -1.0
    assert np.all(x[1][np.arange(encoder.width) != encoder.column("f")] == 0.0)


def test_shapes_and_foreign_configurations():
    cs = _space()
    encoder = ConfigEncoder(cs)
    assert encoder.encode([]).shape == (0, encoder.width) and encoder.vectors([]).shape == (0, encoder.vector_width)
    other = C.new_space(seed=0)
    C.add_hyperparameters(other, [C.uniform_float("z", 0.0, 1.0)])
    with pytest.raises(ValueError, match="do not belong to this space"):
        encoder.vectors(C.sample_configurations(other, 2, seed=0))


def test_search_space_uses_it_in_sorted_order():
    cs = _space()
    space = SearchSpace("hand", "classification", cs, builder=lambda config, seed: None, algorithm_key="algo")
    configs = C.sample_configurations(cs, 50, seed=1)
    expected = ConfigEncoder(cs, sorted(C.hyperparameter_names(cs))).encode(configs)
    assert space.encode(configs).tobytes() == expected.tobytes()
    assert space.encoder.names == space.hyperparameter_names

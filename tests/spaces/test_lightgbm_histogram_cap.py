"""LightGBM's histogram cache is bounded in both built-in spaces (it grows with leaves x features, not rows)."""

import pytest

from optdiv.spaces import cs_compat, get_space
from optdiv.spaces.sklearn_models import LIGHTGBM_HISTOGRAM_MB

pytest.importorskip("lightgbm")


@pytest.mark.parametrize("space_name", ["autosklearn", "autogluon"])
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_every_lightgbm_of_a_built_in_space_caps_its_histogram_cache(space_name, task):
    space = get_space(space_name, task)
    config = cs_compat.config_to_dict(cs_compat.with_defaults(space.configspace, {space.algorithm_key: "lightgbm"}))
    model = space.build(config, seed=0)
    steps = [step for _, step in model.steps] if hasattr(model, "steps") else [model]  # a pipeline or the model
    boosters = [step for step in steps if type(step).__module__.startswith("lightgbm")]
    assert boosters, "the pipeline should end in a LightGBM model"
    assert boosters[-1].get_params()["histogram_pool_size"] == LIGHTGBM_HISTOGRAM_MB > 0

"""DP fine-tuning of a keras.applications backbone: the network, what each part trains, the methods' refusals.

The preset's quick run (every method on a few Fashion-MNIST records) is in tests/experiments/test_presets.py (slow).
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from tfdpmech.experiments.methods import application_finetune  # noqa: F401  (registers the methods)
from tfdpmech.experiments.registry import method


def _count(variables) -> int:
    return int(sum(np.prod(v.shape) for v in variables))


def test_the_backbone_is_keras_mobilenet_v2_with_group_norm_and_each_part_trains_what_it_names():
    import keras

    from tfdpmech.models.application import TOP_BLOCKS, mobilenet_v2_gn, set_trainable_part

    model = mobilenet_v2_gn(10, (28, 28, 1))
    assert model.output_shape == (None, 10) and model.input_shape == (None, 28, 28, 1)
    kinds = {type(layer).__name__ for layer in model.layers}
    assert "BatchNormalization" not in kinds and "GroupNormalization" in kinds and "DepthwiseConv2D" in kinds
    total = model.count_params()
    head = model.get_layer("head")
    set_trainable_part(model, "head")
    assert _count(model.trainable_variables) == _count(head.trainable_variables)
    set_trainable_part(model, "top")
    top = [layer for layer in model.layers if layer.name.startswith(TOP_BLOCKS) or layer.name == "head"]
    assert {id(v) for v in model.trainable_variables} == {id(v) for layer in top for v in layer.trainable_variables}
    assert _count(head.trainable_variables) < _count(model.trainable_variables) < total
    set_trainable_part(model, "all")
    assert _count(model.trainable_variables) == total
    assert np.isfinite(model(np.zeros((2, 28, 28, 1), np.float32)).numpy()).all()
    assert isinstance(model.get_layer("gray_to_rgb"), keras.layers.Concatenate)


def test_the_backbone_normalises_with_the_groups_chosen_on_public_images():
    """BACKBONE_GROUPS is what tools/finetune_backbone_groups.py chose (public images only); every replacement
    has it."""
    import json
    from pathlib import Path

    import keras

    from tfdpmech.models.application import BACKBONE_GROUPS, mobilenet_v2_gn

    tuning = Path(__file__).resolve().parents[2] / "docs" / "results" / "finetune" / "backbone" / "tuning.json"
    recorded = json.loads(tuning.read_text())
    assert len(recorded["runs"]) == len(recorded["grid"]) and recorded["chosen"] == BACKBONE_GROUPS
    norms = [layer for layer in mobilenet_v2_gn(10, (28, 28, 1)).layers
             if isinstance(layer, keras.layers.GroupNormalization)]
    assert norms and {layer.groups for layer in norms} == {BACKBONE_GROUPS}
    by_default = mobilenet_v2_gn(10, (28, 28, 1), groups=None)  # replace_batch_norm's own choice, up to 32
    assert max(layer.groups for layer in by_default.layers if isinstance(layer, keras.layers.GroupNormalization)) == 32


@pytest.mark.parametrize("shape", [(64, 64, 1), (28, 28, 2), (28, 28)])
def test_an_input_the_backbone_cannot_read_is_refused_naming_it(shape):
    from tfdpmech.models.application import mobilenet_v2_gn

    with pytest.raises(ValueError, match="input_shape"):
        mobilenet_v2_gn(10, shape)


def test_an_unknown_part_is_refused_naming_the_choices():
    from tfdpmech.models.application import set_trainable_part

    with pytest.raises(ValueError, match="part='middle'.*head.*top.*all"):
        set_trainable_part(object(), "middle")


def test_the_methods_use_public_data_and_are_private_mode():
    for part in ("head", "top", "all"):
        m = method(f"dpsgd_finetune_{part}")
        assert m.uses_public and m.mode == "private" and m.unavailable() is None


def test_a_method_refuses_another_model_family_or_no_public_data_before_any_training():
    build = application_finetune._finetune("head")
    ctx = types.SimpleNamespace(config=types.SimpleNamespace(model="tanh_cnn"), x_public=np.zeros((5, 28, 28, 1)))
    ctx.require_public = lambda name: None
    with pytest.raises(ValueError, match="--model mobilenet_v2"):
        build(ctx, 1.0, 0)

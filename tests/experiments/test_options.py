"""The comparison's options: one per-ε reader, and every count checked before any run starts."""

import pytest

from tfdpmech.experiments.options import COUNT_OPTIONS, at_epsilon, check_options, option_at
from tfdpmech.experiments.presets import PRESETS
from tfdpmech.experiments.runner import CompareConfig


def test_a_per_epsilon_value_is_read_at_the_runs_epsilon_and_anything_else_as_it_is():
    assert at_epsilon({3.0: 40, 1.0: 20}, 1.0) == 20
    assert at_epsilon({3.0: 40}, 0.5) is None and at_epsilon({3.0: 40}, 0.5, 7) == 7
    assert at_epsilon({"learning_rate": 0.1}, 1.0) == {"learning_rate": 0.1}  # a recipe override, not per ε
    assert at_epsilon(12, 0.5) == 12
    assert option_at({"dpsgd_epochs": {2: 9}}, 2.0, "dpsgd_epochs", 5) == 9
    assert option_at({}, 2.0, "dpsgd_epochs", 5) == 5


@pytest.mark.parametrize("name", COUNT_OPTIONS)
@pytest.mark.parametrize("bad, error", [(0, ValueError), (2.5, TypeError), ("3", TypeError), (True, TypeError)])
def test_every_count_option_is_checked_as_one_value_or_per_key(name, bad, error):
    with pytest.raises(error, match=rf"options\['{name}'\]"):
        check_options({name: bad})
    with pytest.raises(error, match=rf"options\['{name}'\]\[0\.5\]"):
        check_options({name: {1.0: 3, 0.5: bad}})


def test_a_bad_option_is_refused_by_the_comparisons_validation():
    with pytest.raises(ValueError, match=r"options\['gamma'\]"):
        CompareConfig(methods=("nonprivate",), options={"gamma": -1.0}).validate()
    with pytest.raises(TypeError, match=r"options\['per_record_batch'\]\['adlm'\]"):
        CompareConfig(methods=("nonprivate",), options={"per_record_batch": {"adlm": 2.0}}).validate()


def test_a_choice_option_names_one_of_its_values():
    check_options({"augmentation": "crop"})
    check_options({"augmentation": {1.0: "crop", 3.0: "crop_flip"}})
    with pytest.raises(ValueError, match=r"options\['augmentation'\] = 'flip'; use one of \('crop', 'crop_flip'\)"):
        check_options({"augmentation": "flip"})
    with pytest.raises(ValueError, match=r"options\['augmentation'\]\[3\.0\] = None"):
        CompareConfig(methods=("nonprivate_augmented",), options={"augmentation": {3.0: None}}).validate()


def test_every_presets_options_pass_the_check():
    for preset in PRESETS.values():
        for settings in (preset.settings, preset.quick):
            check_options(settings.get("options", {}))

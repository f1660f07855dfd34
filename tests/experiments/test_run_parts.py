"""A run stopped part-way resumes from its last finished epoch: the same run an unbroken one is."""

from __future__ import annotations

import os

import pytest

from tfdpmech.experiments import preset_config, run_comparison
from tfdpmech.experiments import run_parts
from tfdpmech.experiments.run_parts import PARTS_FOLDER


def _config(out, **changes):
    # tanh_cnn's dpsgd trains through make_private / compile / fit on tfdpmech's engine on both stacks
    return preset_config("demo", quick=True, methods=("dpsgd",), model="tanh_cnn", epsilons=(2.0,), seeds=(0,),
                         audit=(), verbose=0, out=str(out), resume=True, **changes,
                         options={"max_private": 256, "max_test": 300, "dpsgd_epochs": 3,
                                  "dpsgd_recipe": {"expected_batch_size": 64}})


class _Killed(Exception):
    pass


@pytest.mark.slow  # three short DP-SGD trainings (~40 s on a loaded 2-core machine)
def test_a_run_killed_after_an_epoch_resumes_as_the_unbroken_run(tmp_path, monkeypatch):
    whole = run_comparison(_config(tmp_path / "whole"))["runs"][0]
    assert "trained_in_parts" not in whole["notes"]
    assert not list((tmp_path / "whole" / PARTS_FOLDER).glob("*"))  # saved parts go once the run is stored

    save, saved = run_parts.RunParts.save, []

    def save_then_kill(self, model, measured):
        save(self, model, measured)
        saved.append(measured["epochs_done"])
        raise _Killed  # the process dies right after the first epoch was written

    monkeypatch.setattr(run_parts.RunParts, "save", save_then_kill)
    with pytest.raises(_Killed):
        run_comparison(_config(tmp_path / "cut"))
    assert saved == [1] and len(list((tmp_path / "cut" / PARTS_FOLDER).glob("*.npz"))) == 1
    monkeypatch.setattr(run_parts.RunParts, "save", save)
    (part,) = (tmp_path / "cut" / PARTS_FOLDER).glob("*.npz")
    saved_part = run_parts.RunParts(tmp_path / "cut", part.stem).saved()
    assert (saved_part["epochs_done"], saved_part["epochs"], saved_part["parts"]) == (1, 3, 1)

    again = run_comparison(_config(tmp_path / "cut"))["runs"][0]
    assert again["notes"]["trained_in_parts"] == 2
    # the optimizer's step count came back with the weights: the remaining steps are the unbroken run's steps
    assert again["accuracy_curve"] == whole["accuracy_curve"] and again["curve_epochs"] == whole["curve_epochs"]
    assert again["accuracy"] == whole["accuracy"]
    assert len(again["seconds_per_epoch"]) == 3
    # one release, the same budget: resuming records nothing again
    releases = [r for r in again["ledger"]["releases"] if r["mechanism"] == "dpsgd"]
    assert len(releases) == 1 and again["epsilon_provable"] == whole["epsilon_provable"]
    assert not list((tmp_path / "cut" / PARTS_FOLDER).glob("*"))


def test_a_part_that_no_longer_fits_the_model_is_dropped(tmp_path):
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    parts = run_parts.RunParts(tmp_path, "k")
    parts.save(model, {"epochs": 5, "epochs_done": 2, "parts": 1})
    with pytest.warns(UserWarning, match="starts from its first epoch"):
        assert parts.restore(model, 6) is None and not parts.path.exists()  # other epochs: the run starts again
    parts.save(model, {"epochs": 5, "epochs_done": 2, "parts": 1})
    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    other.compile(optimizer="sgd", loss="mse")
    with pytest.warns(UserWarning, match="starts from its first epoch"):
        assert parts.restore(other, 5) is None and not parts.path.exists()  # another shape
    parts.save(model, {"epochs": 5, "epochs_done": 2, "parts": 1})
    model.layers[0].kernel.assign(model.layers[0].kernel + 1.0)
    kept = model.layers[0].kernel.numpy() - 1.0
    assert parts.restore(model, 5)["epochs_done"] == 2
    assert (model.layers[0].kernel.numpy() == kept).all()


def test_a_report_lists_a_run_in_progress_with_its_saved_epochs():
    from tfdpmech.report.writer import pending_markdown

    pending = [{"dataset": "mnist", "method": "dpsgd", "epsilon_target": 3.0, "seed": 0, "epochs_saved": 12,
                "epochs": 40}, {"dataset": "mnist", "method": "dpsgd", "epsilon_target": 3.0, "seed": 1}]
    assert "- dpsgd on mnist at target ε=3 (seeds 0: 12 of 40 epochs saved, 1)" in pending_markdown(
        {"pending": pending})


def _key(out):
    from tfdpmech.experiments.run_store import RunStore

    config = _config(out)
    return RunStore(out, config).key(config.datasets[0], "dpsgd", 2.0, 0)


def _never_trained(*args, **kwargs):
    raise AssertionError("the run was trained")


def test_a_run_another_process_is_training_is_refused_before_it_trains(tmp_path, monkeypatch):
    from tfdpmech.experiments import runner

    monkeypatch.setattr(runner, "run_one", _never_trained)
    parts = run_parts.RunParts(tmp_path, _key(tmp_path))
    with parts.held():
        assert parts.lock_path.read_text() == str(os.getpid())
        # a second open file holds the lock as a second process would (flock: one holder per open file)
        with pytest.raises(RuntimeError, match=rf"dpsgd ε=2 seed=0: process {os.getpid()} is training it now .*wait"):
            run_comparison(_config(tmp_path))
        with pytest.raises(RuntimeError, match="is training it now"):
            with run_parts.RunParts(tmp_path, parts.path.stem).held():
                pass
    assert not parts.lock_path.exists()
    with parts.held():  # released: the next holder takes it
        pass


def test_a_run_stored_by_another_process_meanwhile_is_read_not_trained_again(tmp_path, monkeypatch):
    from tfdpmech.experiments import runner
    from tfdpmech.experiments.run_store import RunStore

    monkeypatch.setattr(runner, "run_one", _never_trained)
    held = run_parts.RunParts.held
    skipped = {"dataset": _config(tmp_path).datasets[0], "method": "dpsgd", "epsilon_target": 2.0, "seed": 0,
               "reason": "stored by the other process"}

    def stored_by_another_process_first(self, name=None):
        # the other process finished this run after this one read runs.jsonl, before it took the lock
        RunStore(tmp_path, _config(tmp_path)).add(self.path.stem, skipped=skipped)
        return held(self, name)

    monkeypatch.setattr(run_parts.RunParts, "held", stored_by_another_process_first)
    report = run_comparison(_config(tmp_path))
    assert report["skipped"] == [skipped] and report["stored_runs"] == 1

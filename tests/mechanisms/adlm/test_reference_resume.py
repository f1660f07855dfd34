"""The reference modes resume at any step: a run stopped and started again ends as the unbroken run,
a resume with other settings is refused by name, and bad step counts are refused before any budget."""

import json

import numpy as np
import pytest

from tfdpmech.mechanisms.adlm import reference as ar
from tfdpmech.mechanisms.adlm.reference_steps import BatchSampler, next_batch_indices
from tfdpmech.mechanisms.adlm.networks import lenet5_relevance_model


def data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    # a class signal the network can pick up in a few steps: a bright band at the row of the class
    x = rng.random((n, 28, 28, 1)).astype(np.float32) * 0.3
    for i, c in enumerate(np.argmax(y, 1)):
        x[i, 2 * c + 4, :, 0] = 1.0
    return x, y


X, Y = data()
SETS = dict(x_test=X[:100], y_test=Y[:100], x_val=X[100:200], y_val=Y[100:200])


class Killed(Exception):
    pass


def run(path=None, *, steps=12, stop=None, batch_size=32, eval_every=4, seed=3, cls=ar.ILMReference):
    """One run; ``stop``: raise inside the evaluation callback at that step (the process dies there)."""
    ref = cls(0.1, 0.2, batch_size, seed=seed)

    def callback(step, accuracy, loss):
        if step == stop:
            raise Killed

    try:
        history = ref.fit(X, Y, steps=steps, eval_every=eval_every, state_path=path, callback=callback, **SETS)
    except Killed:
        return ref, None
    return ref, history


def same_variables(a, b) -> bool:
    pairs = [*zip(a.model.variables, b.model.variables), *zip(a.optimizer.variables, b.optimizer.variables)]
    return len(pairs) > 0 and all(np.array_equal(u.numpy(), v.numpy()) for u, v in pairs)


def test_the_batch_sampler_state_puts_back_the_batch_order():
    a = BatchSampler(50, 16, np.random.default_rng(1))
    first = [a.next() for _ in range(4)]  # 3 batches a pass: the 4th starts a reshuffled pass
    state = a.state()
    later = [a.next() for _ in range(5)]
    b = BatchSampler(50, 16, np.random.default_rng(99))
    b.set_state(state)
    assert all(np.array_equal(u, v) for u, v in zip(later, [b.next() for _ in range(5)]))
    # the generator form draws the same batches as the sampler
    again = list(next_batch_indices(50, 16, 4, np.random.default_rng(1)))
    assert all(np.array_equal(u, v) for u, v in zip(first, again))


def test_a_run_killed_at_step_8_resumes_and_ends_as_the_unbroken_run(tmp_path):
    whole, unbroken = run()
    path = tmp_path / "run.npz"
    _, killed = run(path, stop=8)
    assert killed is None and json.loads(path.with_suffix(".curve.jsonl").read_text().splitlines()[-1])["step"] == 8
    resumed, history = run(path)
    assert history["part_starts"] == [0, 8]
    assert same_variables(whole, resumed)  # weights, batch-norm statistics, Adam's step count and moments
    assert int(resumed.optimizer.iterations.numpy()) == 12
    assert np.array_equal(whole.generator.state.numpy(), resumed.generator.state.numpy())
    for key in ("step", "accuracy", "validation_accuracy", "loss"):
        assert history[key] == unbroken[key], key
    assert unbroken["step"] == [0, 4, 8, 12] and len(set(unbroken["accuracy"])) > 1  # the curve moves
    lines = [json.loads(line) for line in path.with_suffix(".curve.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 4, 8, 12]
    assert [line["validation_accuracy"] for line in lines] == unbroken["validation_accuracy"]


def test_a_longer_run_continues_a_finished_one_as_if_unbroken(tmp_path):
    path = tmp_path / "run.npz"
    run(path, steps=10)  # ends off the evaluation grid (10): that point is dropped when the run goes on
    longer, history = run(path, steps=14)
    whole, unbroken = run(steps=14)
    assert same_variables(whole, longer)
    assert history["step"] == unbroken["step"] == [0, 4, 8, 12, 14]
    assert history["accuracy"] == unbroken["accuracy"]


def test_a_resume_with_other_settings_is_refused_by_name(tmp_path):
    path = tmp_path / "run.npz"
    run(path, stop=8)
    for changes, name in (({"batch_size": 16}, "batch_size"), ({"eval_every": 2}, "eval_every"),
                          ({"seed": 4}, "seed")):
        with pytest.raises(ValueError, match=rf"{name}.*differs.*{path.name}"):
            run(path, **changes)
    with pytest.raises(ValueError, match=r"records"):
        ar.ILMReference(0.1, 0.2, 32, seed=3).fit(X[:200], Y[:200], steps=12, eval_every=4, state_path=path)
    with pytest.raises(ValueError, match=r"steps=6 is below the 8 steps"):
        run(path, steps=6)


def test_a_state_needs_a_seed(tmp_path):
    with pytest.raises(ValueError, match="seed"):
        ar.ILMReference(0.1, 0.2, 32).fit(X, Y, steps=2, state_path=tmp_path / "run.npz")


@pytest.mark.parametrize("name", ["steps", "eval_every"])
@pytest.mark.parametrize("bad", [0, -5, 2.5, "10", True, None])
def test_bad_step_counts_name_the_argument_the_value_and_the_fix_before_any_budget(name, bad):
    ref = ar.ILMReference(0.1, 0.2, 32, seed=0)
    kwargs = {"steps": 4, "eval_every": 2, name: bad}
    with pytest.raises(ValueError, match=rf"{name}={bad!r}.*integer >= 1; .*pass"):
        ref.fit(X, Y, **kwargs)
    assert len(ref.ledger) == 0
    if name == "steps" and bad is None:  # prepare(steps=None) is the epochs mode
        return
    # through the contract's prepare: refused before the relevance step spends eps1
    adlm = ar.AdLMReference(0.1, 0.1, 0.2, 32, seed=0)
    with pytest.raises(ValueError, match=rf"{name}={bad!r}"):
        adlm.prepare(None, X, Y, relevance_model=lenet5_relevance_model(seed=0), **kwargs)
    assert len(adlm.ledger) == 0

"""pCDBN in the runner: the private mode with either calibration of the head's one release."""

import pytest

from tfdpmech.experiments import CompareConfig, run_comparison


def test_private_pcdbn_with_a_gaussian_head_is_proven_at_the_target():
    config = CompareConfig(methods=("pcdbn_private_gauss",), epsilons=(4.0,), seeds=(0,), model="cnn", epochs=1,
                           batch_size=200, public=0, audit=(), verbose=0,
                           options={"pretrain_epochs": 1, "head_epochs": 2, "max_private": 600, "max_test": 200})
    (run,) = run_comparison(config)["runs"]
    assert run["mode"] == "private" and run["delta"] == pytest.approx(1e-5)
    assert run["epsilon_claimed"] == pytest.approx(4.0)
    assert run["epsilon_provable"] == pytest.approx(4.0, rel=1e-3)
    mechanisms = {r["component"]: r["mechanism"] for r in run["ledger"]["releases"]}
    assert mechanisms["output_layer"] == "gaussian"
    assert all(m in ("laplace", "none") for c, m in mechanisms.items() if c != "output_layer")


def test_the_reference_fine_tunes_for_its_own_option_else_the_shared_one():
    """``pcdbn_reference_epochs`` (the code's 2,400 in mnist-papers) sets pCDBN's reference alone; without it the
    row takes ``reference_epochs``, the option every reference row reads."""
    import types

    import numpy as np

    from tfdpmech.experiments.registry import METHODS

    build = METHODS["pcdbn_reference"].prepare.build

    def epochs(**options):
        ctx = types.SimpleNamespace(config=types.SimpleNamespace(options=options, epochs=3), n_private=8,
                                    x_private=np.zeros((8, 28, 28, 1), np.float32), y_private=np.zeros(8))
        return build(ctx, 0.5, 0).prepared["epochs"]

    assert epochs(reference_epochs=20, pcdbn_reference_epochs=2400) == 2400
    assert epochs(reference_epochs=20) == 20
    assert epochs(head_epochs=2) == 40  # 20 × head_epochs

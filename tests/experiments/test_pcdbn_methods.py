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

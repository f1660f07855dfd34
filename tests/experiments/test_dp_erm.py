"""The DP-ERM comparison (tfdpmech.experiments.dp_erm): table, JSON and the baselines."""

import numpy as np
import pytest


# --- the comparison module ------------------------------------------------------------------------------
def test_experiment_main_writes_table_and_json(tmp_path, capsys):
    import json

    from tfdpmech.experiments import dp_erm as experiment

    assert experiment.main(["--quick", "--datasets", "iris", "--methods", "nonprivate,ip_paper", "--seeds", "1",
                            "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| iris | linear | ip_paper | 0.01 | 1 |" in out and "none proven" in out
    results = json.loads((tmp_path / "dp_erm_results.json").read_text())
    rows = results["summary"]
    assert {r["method"] for r in rows} == {"nonprivate", "ip_paper"} and len(rows) == 4
    assert all(0.0 <= r["accuracy_mean"] <= 1.0 for r in rows)
    assert (tmp_path / "dp_erm_table.md").read_text().startswith("| dataset |")
    data = experiment.load_dataset("breast_cancer")
    assert np.linalg.norm(data["x_train"], axis=1).max() <= 1.0 + 1e-12 and data["num_classes"] == 2
    with pytest.raises(ValueError, match="unknown dataset"):
        experiment.load_dataset("adult")


@pytest.mark.dpsgd
def test_experiment_baselines_run():
    pytest.importorskip("tensorflow_privacy", reason="Kifer objective perturbation and DP-SGD need tensorflow-privacy")
    from tfdpmech.experiments import dp_erm as experiment

    config = experiment.ExperimentConfig(datasets=("iris",), methods=("kifer", "dpsgd"), epsilons=(1.0,), seeds=(0,),
                                         dpsgd_epochs=2, kifer_steps=40)
    results = experiment.run_experiment(config, log=None)
    by_method = {r["method"]: r for r in results["summary"]}
    assert by_method["kifer"]["epsilon_provable"] is None and by_method["kifer"]["epsilon_claimed"] == 1.0
    dpsgd = by_method["dpsgd"]
    assert dpsgd["epsilon_claimed"] <= 1.0 and dpsgd["epsilon_provable"] is not None
    assert "add/remove" in dpsgd["adjacency"]

"""The seed-paper table: each paper's claim beside its reference and private modes, DP-SGD and public_only here."""

from tfdpmech.report.papers import NOT_RUN, paper_table_markdown


def _row(method, paper, mode, eps, accuracy, provable=None, neighbours="replace_one", diverged=0):
    return {"method": method, "paper": paper, "mode": mode, "epsilon_target": eps, "epsilon_claimed": eps,
            "epsilon_provable": provable,
            "accuracy_mean": accuracy, "neighbours": neighbours, "protects": "record", "diverged": diverged}


PUBLISHED = ({"label": "AdLM", "paper": "adlm", "epsilon": 0.25, "accuracy": 0.902, "setting": "code: 80,001 steps"},
             {"label": "AFRRS", "paper": "afrrs", "epsilon": 0.6, "accuracy": 0.988},
             {"label": "pSGD", "dpsgd_of": ("adlm",), "epsilon": 0.25, "accuracy": 0.8209},
             {"label": "T&B", "epsilon": 3.0, "accuracy": 0.981})  # no paper: not a row of this table


def test_one_line_per_paper_at_its_own_epsilon():
    rows = [_row("adlm_per_record", "adlm", "private", 0.25, 0.7512, provable=0.2500000001),
            _row("adlm_reference", "adlm", "reference", 0.25, 0.8801),
            _row("dpsgd", None, "private", 0.25, 0.9304, provable=0.25, neighbours="add_remove"),
            _row("dpsgd", None, "private", 0.6, 0.951, provable=0.6, neighbours="add_remove"),
            _row("afrrs_reference", "afrrs", "reference", 0.6, 0.5, diverged=1),
            _row("public_only", None, "none", None, 0.92)]
    runs = [{"method": "adlm_reference", "notes": {"batch_size": 1000, "steps_per_epoch": 59},
             "seconds_per_epoch": [1.0] * 20}]
    lines = paper_table_markdown({"config": {"published": PUBLISHED, "batch_size": 1000, "epochs": 20}, "runs": runs},
                                 rows)
    table = [line for line in lines if line.startswith("| AdLM") or line.startswith("| AFRRS")]
    assert len(table) == 2 and not any(line.startswith("| T&B") for line in lines)
    adlm, afrrs = table
    # provable ε rounded up, with its neighbour relation; the paper's own DP-SGD beside it
    assert adlm == ("| AdLM | 0.25 | 90.20 % | 88.01 % (claimed ε 0.25, none proven) | "
                    "75.12 % (claimed ε 0.25, provable ε 0.26, replace-one, record) | "
                    "93.04 % (claimed ε 0.25, provable ε 0.25, add/remove, record) | 92.00 % | 82.09 % | "
                    "batch 1000, 20 epochs, 1180 steps / code: 80,001 steps |")
    assert (f"50.00 % (diverged: NaN outputs) (claimed ε 0.6, none proven) | {NOT_RUN} | "
            "95.10 % (claimed ε 0.6, provable ε 0.6, add/remove, record)") in afrrs
    assert afrrs.endswith("| 92.00 % | – | – / – |")


def test_no_table_without_papers():
    assert paper_table_markdown({"config": {"published": PUBLISHED[3:]}}, []) == []
    assert paper_table_markdown({"config": {}}, []) == []


def test_a_paper_without_a_figure_on_this_data_says_why_in_its_claim_cell():
    point = {"label": "Kang", "paper": "input_perturbation", "epsilon": 0.25, "accuracy": None,
             "claim": "no MNIST experiment"}
    rows = [_row("ip_private_head", "input_perturbation", "private", 0.25, 0.3, provable=0.25)]
    (line,) = [line for line in paper_table_markdown({"config": {"published": (point,)}, "runs": []}, rows)
               if line.startswith("| Kang")]
    assert line.startswith("| Kang | 0.25 | – (no MNIST experiment) | not run yet | 30.00 % (claimed ε 0.25, "
                           "provable ε 0.25, replace-one, record) |")


def test_a_per_query_claim_says_so():
    point = {"label": "Lu", "paper": "output_perturbation", "epsilon": 0.5, "accuracy": None, "claim": "none"}
    row = {**_row("outpert_reference", "output_perturbation", "reference", 0.5, 0.9), "per": "query"}
    (line,) = [line for line in paper_table_markdown({"config": {"published": (point,)}, "runs": []}, [row])
               if line.startswith("| Lu")]
    assert "| 90.00 % (claimed ε 0.5 per query, none proven) |" in line


def test_dp_sgd_on_the_public_features_gets_a_column_where_it_ran():
    point = {"label": "AdLM", "paper": "adlm", "epsilon": 0.25, "accuracy": 0.902}
    rows = [_row("dpsgd", None, "private", 0.25, 0.93, provable=0.25, neighbours="add_remove"),
            _row("dpsgd_head", "dpsgd", "private", 0.25, 0.9694, provable=0.25, neighbours="add_remove"),
            _row("public_only", None, "none", None, 0.9644)]
    lines = paper_table_markdown({"config": {"published": (point,)}, "runs": []}, rows)
    (header,) = [line for line in lines if line.startswith("| paper |")]
    (line,) = [line for line in lines if line.startswith("| AdLM")]
    assert "| dpsgd here | dpsgd_head here | public_only |" in header
    assert ("| 93.00 % (claimed ε 0.25, provable ε 0.25, add/remove, record) | 96.94 % (claimed ε 0.25, provable ε "
            "0.25, add/remove, record) | 96.44 % |") in line
    assert all(line.count("|") == header.count("|") for line in lines if line.startswith("|"))
    without = paper_table_markdown({"config": {"published": (point,)}, "runs": []}, rows[:1] + rows[2:])
    assert not any("dpsgd_head" in line for line in without)

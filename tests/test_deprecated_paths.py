"""The old import paths of moved modules: each still imports, gives the new module's objects, warns once.

And the package itself never goes through them: importing ``tfdpmech`` and every public subpackage,
and reading every public name, raises no deprecation warning (in a fresh interpreter), and no
module of the package imports an old path (read from the source).
"""

import json
import os
import subprocess
import sys

import pytest

from tests.test_import_graph import MODULES, _imports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# old path → the module(s) its names now come from
MOVED = {
    "tfdpmech.allocation": ["tfdpmech.mechanisms.adlm.allocation"],
    "tfdpmech.chebyshev": ["tfdpmech.mechanisms.pcdbn.chebyshev"],
    "tfdpmech.relevance": ["tfdpmech.mechanisms.adlm.lrp", "tfdpmech.mechanisms.adlm.private_relevance"],
    "tfdpmech.relevance.lrp": ["tfdpmech.mechanisms.adlm.lrp"],
    "tfdpmech.relevance.private_relevance": ["tfdpmech.mechanisms.adlm.private_relevance"],
    "tfdpmech.layers.conv_rbm": ["tfdpmech.mechanisms.pcdbn.conv_rbm"],
    "tfdpmech.layers.input_noise": ["tfdpmech.mechanisms.adlm.input_noise"],
    "tfdpmech.layers.noisy_output_neuron": ["tfdpmech.mechanisms.output_perturbation.noisy_output_neuron"],
    "tfdpmech.layers.perturbed_bias": ["tfdpmech.mechanisms.adlm.perturbed_bias"],
    "tfdpmech.losses.taylor_cross_entropy": ["tfdpmech.mechanisms.adlm.taylor_cross_entropy"],
    "tfdpmech.losses.convexified_cross_entropy": ["tfdpmech.mechanisms.output_perturbation.convexified_cross_entropy"],
    "tfdpmech.models.afrrs": ["tfdpmech.mechanisms.afrrs.models"],
    "tfdpmech.models.authors": ["tfdpmech.mechanisms.adlm.networks", "tfdpmech.mechanisms.pcdbn.networks"],
    "tfdpmech.models.convexified": ["tfdpmech.mechanisms.output_perturbation.convexified_mlp"],
    "tfdpmech.models.erm": ["tfdpmech.mechanisms.input_perturbation.models"],
    "tfdpmech.heads.softmax_head": ["tfdpmech.mechanisms.pcdbn.softmax_head"],
    "tfdpmech.heads.calibration": ["tfdpmech.accounting.gaussian"],
    "tfdpmech.mechanism": ["tfdpmech.contract"],
}
# old paths also reachable as an attribute of their package (``tfdpmech.chebyshev`` after ``import tfdpmech``)
BY_ATTRIBUTE = ("tfdpmech.chebyshev", "tfdpmech.layers.conv_rbm", "tfdpmech.mechanism")

PUBLIC_PACKAGES = [
    "tfdpmech", "tfdpmech.accounting", "tfdpmech.audit", "tfdpmech.data", "tfdpmech.dpsgd", "tfdpmech.features",
    "tfdpmech.heads", "tfdpmech.layers", "tfdpmech.losses", "tfdpmech.mechanisms", "tfdpmech.mechanisms.adlm",
    "tfdpmech.mechanisms.afrrs", "tfdpmech.mechanisms.input_perturbation", "tfdpmech.mechanisms.output_perturbation",
    "tfdpmech.mechanisms.pcdbn", "tfdpmech.metrics", "tfdpmech.models", "tfdpmech.noise", "tfdpmech.validation",
    "tfdpmech.experiments", "tfdpmech.report", "tfdpmech.cli",
]

_PROBE = r"""
import importlib, json, sys, warnings

moved, by_attribute, packages = json.loads(sys.argv[1])


def ours(caught):
    return [w for w in caught if issubclass(w.category, DeprecationWarning) and "tfdpmech" in str(w.message)]


out = {"package": [], "paths": {}}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for name in packages:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            getattr(module, attr)
    out["package"] = [f"{w.filename}:{w.lineno}: {w.message}" for w in ours(caught)]

for old, new in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if old in by_attribute:
            parent, _, leaf = old.rpartition(".")
            module = getattr(importlib.import_module(parent), leaf)
        else:
            exec(compile(f"import {old}\n", "importer_probe.py", "exec"), {})
            module = sys.modules[old]
    first = [w for w in ours(caught) if str(w.message).startswith(old + " has moved")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(f"import {old}\n", "importer_probe.py", "exec"), {})
        importlib.reload(module)  # runs the module again: still no second warning in this process
    again = [w for w in ours(caught) if str(w.message).startswith(old + " has moved")]
    targets = [importlib.import_module(n) for n in new]
    differ = []
    for attr in module.__all__:
        mine = getattr(module, attr)
        if not any(getattr(t, attr, object()) is mine for t in targets):
            differ.append(attr)
    public = sorted({a for t in targets for a in getattr(t, "__all__", ())} - set(module.__all__))
    out["paths"][old] = {
        "module": getattr(module, "__name__", None), "warnings": [str(w.message) for w in first],
        "filenames": [w.filename for w in first], "again": len(again), "differ": differ,
        "missing": public, "names": len(module.__all__),
    }
print("PROBE" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([MOVED, list(BY_ATTRIBUTE), PUBLIC_PACKAGES])],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("PROBE")]
    assert result.returncode == 0 and line, result.stderr[-3000:]
    return json.loads(line[-1][len("PROBE"):])


def test_importing_the_package_and_every_public_name_raises_no_deprecation_warning(probe):
    assert probe["package"] == []


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_imports_warns_once_and_gives_the_same_objects(probe, old):
    seen = probe["paths"][old]
    assert seen["module"] == old
    assert len(seen["warnings"]) == 1, seen["warnings"]
    message = seen["warnings"][0]
    for new in MOVED[old]:
        assert new.rsplit(".", 1)[0] in message
    assert "kept for one release" in message
    if old not in BY_ATTRIBUTE:
        assert seen["filenames"] == ["importer_probe.py"]  # the warning points at the importing line
    assert seen["again"] == 0
    # heads.calibration keeps its old gaussian_epsilon(sigma, sensitivity, delta) signature (test below)
    assert seen["names"] > 0 and seen["differ"] == (["gaussian_epsilon"] if old == "tfdpmech.heads.calibration" else [])


@pytest.mark.parametrize("old", sorted(o for o in MOVED if o != "tfdpmech.heads.calibration"))
def test_old_path_offers_every_public_name_of_the_new_module(probe, old):
    assert probe["paths"][old]["missing"] == []


def test_no_module_of_the_package_imports_an_old_path():
    shims = set(MOVED) & set(MODULES)
    assert shims == set(MOVED), sorted(set(MOVED) - shims)
    found = {}
    for module, path in MODULES.items():
        if module in shims:
            continue
        hits = (_imports(module, path, top_level=True) | _imports(module, path, top_level=False)) & shims
        if hits:
            found[module] = sorted(hits)
    assert not found, f"modules importing an old path: {found}"


def test_old_heads_gaussian_epsilon_is_the_calibration_of_sigma_over_sensitivity():
    import warnings

    from tfdpmech.accounting.gaussian import gaussian_epsilon

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from tfdpmech.heads import calibration
    sigma = calibration.gaussian_sigma(2.0, 0.5, 1e-5)
    assert calibration.gaussian_epsilon(sigma, 2.0, 1e-5) == gaussian_epsilon(sigma / 2.0, 1e-5, accountant="pld")
    assert calibration.gaussian_epsilon(sigma, 2.0, 1e-5, accountant="analytic") == pytest.approx(0.5, rel=1e-6)

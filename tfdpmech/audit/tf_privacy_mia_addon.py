"""Add tensorflow-privacy's membership-inference attacks to an installed tensorflow-privacy 0.9.0.

``python -m tfdpmech.audit.tf_privacy_mia_addon``

The PyPI wheel of tensorflow-privacy 0.9.0 ships ``tensorflow_privacy/privacy/membership_inference_attack``
(import shims) but not the ``privacy_tests`` package they point to, so
``import tensorflow_privacy.privacy.privacy_tests`` fails (tensorflow/privacy issue #555). The
0.8.12 wheel on PyPI does ship it. This command downloads that wheel with pip, checks its SHA-256,
and unpacks only ``tensorflow_privacy/privacy/privacy_tests/`` next to the installed 0.9.0 package;
nothing else of the installed package is touched, and a marker file records where the code came
from. The attack code needs pandas, statsmodels, immutabledict and scikit-learn < 1.7 (it imports
``sklearn.utils.parallel_backend``): ``pip install 'tfdpmech[audit]'``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

__all__ = ["install", "main", "WHEEL_REQUIREMENT", "WHEEL_SHA256", "SUBPACKAGE"]

WHEEL_REQUIREMENT = "tensorflow-privacy==0.8.12"
WHEEL_SHA256 = "d9feae96db6f3cec59c769460fbf71a493f4c6e546e8688f86b4e2f833b7613e"
SUBPACKAGE = "tensorflow_privacy/privacy/privacy_tests/"
MARKER = "TFDPMECH_ADDON.txt"


def _check_requirements() -> None:
    missing = [m for m in ("pandas", "statsmodels", "immutabledict") if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(f"tensorflow-privacy's attack code needs {missing}: pip install 'tfdpmech[audit]'")
    import sklearn.utils

    if not hasattr(sklearn.utils, "parallel_backend"):
        import sklearn

        raise RuntimeError(
            f"scikit-learn {sklearn.__version__} has no sklearn.utils.parallel_backend, which "
            "tensorflow-privacy's attack code imports: pip install 'scikit-learn<1.7' (or 'tfdpmech[audit]')"
        )


def _privacy_dir() -> str:
    spec = importlib.util.find_spec("tensorflow_privacy")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("tensorflow-privacy is not installed: pip install 'tfdpmech[tfprivacy,audit]'")
    return os.path.join(list(spec.submodule_search_locations)[0], "privacy")


def _download(folder: str) -> str:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--dest", folder, WHEEL_REQUIREMENT]
    subprocess.run(cmd, check=True)
    wheels = [f for f in os.listdir(folder) if f.endswith(".whl")]
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel from {' '.join(cmd)}, found {wheels}")
    return os.path.join(folder, wheels[0])


def install(wheel: str | None = None, log=print) -> str:
    """Unpack ``privacy_tests`` from the 0.8.12 wheel into the installed tensorflow-privacy.

    Args:
        wheel: a local copy of the wheel (its SHA-256 is checked); None downloads it with pip.

    Returns:
        The folder the sub-package lives in. Does nothing when it is already there.

    Raises:
        ValueError: the wheel's SHA-256 is not the pinned one (nothing is written).
        RuntimeError: a requirement of the attack code or tensorflow-privacy itself is missing.
    """
    if wheel is not None and not os.path.isfile(wheel):
        raise ValueError(f"wheel={wheel!r} is not a file; pass the path of tensorflow_privacy-0.8.12-py3-none-any.whl "
                         "or leave it out to download it with pip")
    _check_requirements()
    target = os.path.join(_privacy_dir(), "privacy_tests")
    if os.path.isdir(target):
        log(f"tensorflow-privacy's privacy_tests is already installed at {target}")
        return target
    with tempfile.TemporaryDirectory() as tmp:
        wheel = wheel or _download(tmp)
        with open(wheel, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        if digest != WHEEL_SHA256:
            raise ValueError(f"wheel {wheel!r} has SHA-256 {digest}, not that of {WHEEL_REQUIREMENT} "
                             f"({WHEEL_SHA256}); nothing installed")
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if m.startswith(SUBPACKAGE) and not m.endswith("/")]
            zf.extractall(os.path.join(tmp, "unpacked"), members)
        # copy next to the target, then rename: an interrupted install leaves no half package behind
        staging = tempfile.mkdtemp(prefix=".privacy_tests-", dir=os.path.dirname(target))
        try:
            shutil.copytree(os.path.join(tmp, "unpacked", SUBPACKAGE), staging, dirs_exist_ok=True)
            with open(os.path.join(staging, MARKER), "w") as fh:
                fh.write(f"Unpacked by tfdpmech.audit.tf_privacy_mia_addon from the PyPI wheel {WHEEL_REQUIREMENT} "
                         f"(sha256 {WHEEL_SHA256}); the 0.9.0 wheel omits this sub-package. "
                         "Remove this folder to undo.\n")
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    log(f"installed tensorflow-privacy 0.8.12's privacy_tests ({len(members)} files) into {target}")
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", default=None, help="use this local copy of the 0.8.12 wheel instead of pip")
    args = parser.parse_args(argv)
    try:
        install(args.wheel)
    except (RuntimeError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

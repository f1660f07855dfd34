"""The installer of tensorflow-privacy's membership-inference attack code: hash check, nothing half-installed."""

from __future__ import annotations

import zipfile

import pytest

from tfdpmech.audit import tf_privacy_mia_addon


def test_mia_addon_refuses_a_wheel_with_another_hash(tmp_path, monkeypatch):
    fake = tmp_path / "tensorflow_privacy-0.8.12-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("tensorflow_privacy/privacy/privacy_tests/__init__.py", "")
    site = tmp_path / "site" / "tensorflow_privacy" / "privacy"
    site.mkdir(parents=True)
    monkeypatch.setattr(tf_privacy_mia_addon, "_check_requirements", lambda: None)
    monkeypatch.setattr(tf_privacy_mia_addon, "_privacy_dir", lambda: str(site))
    with pytest.raises(ValueError, match="SHA-256"):
        tf_privacy_mia_addon.install(str(fake), log=lambda s: None)
    assert not (site / "privacy_tests").exists()
    with pytest.raises(ValueError, match="wheel=.*is not a file"):
        tf_privacy_mia_addon.install(str(tmp_path / "missing.whl"), log=lambda s: None)
    assert not (site / "privacy_tests").exists()

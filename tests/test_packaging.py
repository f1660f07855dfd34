"""What the sdist and the wheel are made of exists, and the two pin files describe the two stacks."""

import configparser
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as fh:
        return fh.read()


def _pins(name: str) -> dict:
    pins = {}
    for line in _read(name).splitlines():
        line = line.split("#")[0].strip()
        if line:
            package, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line).groups()
            key = re.sub(r"[-_.]+", "-", package).lower()
            assert key not in pins, f"{name} pins {package} twice"
            pins[key] = version
    return pins


def test_manifest_names_only_what_exists():
    for line in _read("MANIFEST.in").splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "include":
            missing = [w for w in words[1:] if not glob.glob(os.path.join(ROOT, w))]
            assert not missing, f"MANIFEST.in includes files that do not exist: {missing}"
        elif words[0] == "recursive-include":
            folder, patterns = words[1], words[2:]
            assert all(glob.glob(os.path.join(ROOT, folder, "**", p), recursive=True) for p in patterns), line
        else:
            raise AssertionError(f"MANIFEST.in: a directive this test does not read: {line!r}")


def test_the_licence_file_is_the_apache_2_text_setup_cfg_names():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    assert cfg["metadata"]["license"] == "Apache-2.0"
    assert cfg["metadata"]["license_files"].split() == ["LICENSE"]
    text = _read("LICENSE")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_the_default_pins_are_today_s_stack_and_the_tfprivacy_pins_tf_2_15():
    default, tfprivacy = _pins("constraints.txt"), _pins("constraints-tfprivacy.txt")
    assert default["tensorflow"].startswith("2.2") and default["keras"].startswith("3.")
    assert "tensorflow-privacy" not in default
    assert tfprivacy["tensorflow"].startswith("2.15.") and tfprivacy["tensorflow-privacy"] == "0.9.0"
    # dp-accounting requires attrs<24: the pin (and the README's install note) say so
    assert int(default["attrs"].split(".")[0]) < 24 and "attrs" in _read("README.md")

#!/usr/bin/env bash
# Checks that an interpreter can host tfdpmech's default stack before anything is downloaded
# (usage: tools/check_python.sh python3). Prints nothing and succeeds for Python 3.11, 3.12 or 3.13
# with the venv module; otherwise prints one line saying which versions work and how to get one.
set -u
py=${1:?usage: tools/check_python.sh PYTHON}
supported="3.11, 3.12 or 3.13"
get="pyenv install 3.13, apt install python3.13-venv, or python.org; then make PYTHON=/path/to/python3.13 ..."
if ! command -v "$py" >/dev/null 2>&1; then
  echo "tfdpmech needs Python $supported; '$py' is not on PATH: $get" >&2
  exit 1
fi
version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
case "$version" in
  3.11|3.12|3.13) ;;
  *) echo "tfdpmech needs Python $supported (TensorFlow has no wheel for the others); $py is ${version:-unknown}: $get" >&2
     exit 1 ;;
esac
if ! "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  echo "$py ($version) has no venv module: apt install python$version-venv (or use a python.org/pyenv build)" >&2
  exit 1
fi

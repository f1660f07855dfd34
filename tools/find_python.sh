#!/usr/bin/env bash
# Prints the path of a working Python X.Y interpreter (usage: tools/find_python.sh 3.13 [VARIABLE]), or
# fails with one line saying how to get one or to pass VARIABLE=/path/to/pythonX.Y. Looks at pythonX.Y on
# PATH, then at pyenv's versions (pyenv's shim answers only for the selected version, so the interpreter
# is called directly).
set -u
want=${1:?usage: tools/find_python.sh X.Y}
candidates=("python$want")
if command -v pyenv >/dev/null 2>&1; then
  for p in "$(pyenv root)"/versions/"$want".*/bin/python"$want"; do candidates+=("$p"); done
fi
for p in "$HOME"/.pyenv/versions/"$want".*/bin/python"$want" /usr/bin/python"$want" /usr/local/bin/python"$want"; do
  candidates+=("$p")
done
for p in "${candidates[@]}"; do
  if "$p" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$want'" >/dev/null 2>&1; then
    command -v "$p"
    exit 0
  fi
done
echo "Python $want not found: install it (pyenv install $want, or apt/python.org) or pass ${2:-PYTHON}=/path/to/python$want" >&2
exit 1

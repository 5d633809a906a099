#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04).
# It installs what grading needs: Python, g++ and binutils (the cpu backend, the static
# check's nm), util-linux (setpriv and unshare, for the sandbox), and the pinned packages.
# AUTOGRADER_ROOT moves /autograder (a test's scratch copy); AUTOGRADER_PYTHON names an
# interpreter that already has the packages, and then nothing is installed.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
if [ -n "${AUTOGRADER_PYTHON:-}" ]; then
  echo "$AUTOGRADER_PYTHON" > "$ROOT/source/python"
  echo "setup.sh: using $AUTOGRADER_PYTHON, nothing installed"
  exit 0
fi
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv g++ binutils util-linux
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install -q --upgrade pip
"$ROOT/venv/bin/pip" install -q -r "$ROOT/source/requirements.txt"
echo "$ROOT/venv/bin/python" > "$ROOT/source/python"

#!/usr/bin/env bash
# Build the drop-in rewards test environment: Python 3.13, TRL, verl and NeMo Gym at the versions
# in requirements.txt, and this project editable.
#
# NeMo Gym 0.7.0 declares Python >= 3.13.14; where the newest interpreter on the machine is an
# older 3.13 release, packages are resolved for 3.13.14 (--python-version) and installed on it,
# and the tests marked `dropins` show whether the code they drive runs there.
#
# Usage: ci/dropins/build_env.sh VENV_DIR
# Exit codes: 0 built; 3 no Python 3.13 on this machine; anything else: a real failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="$1"

source ci/python313.sh

if ! python313="$(find_python313)"; then
    echo "no Python 3.13 interpreter found (PATH or pyenv); NeMo Gym 0.7.0 needs 3.13" >&2
    exit 3
fi
echo "drop-ins env: $python313 ($("$python313" -V))"
uv venv --quiet --allow-existing --python "$python313" "$venv"
# --no-config: the project's [tool.uv] settings (its transformers override) are for the main
# environment; verl 0.9.1 caps transformers below 5.11, which this environment follows.
VIRTUAL_ENV="$venv" uv pip install --quiet --no-config --python-version 3.13.14 -r ci/dropins/requirements.txt -e .
# Fail here, with the frameworks' own messages, if the modules the tests drive do not import.
"$venv/bin/python" -c 'import trl, verl.experimental.reward_loop.reward_loop, nemo_gym.base_resources_server'

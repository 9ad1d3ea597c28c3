#!/usr/bin/env bash
# Build the NeMo-RL test environment: Python 3.13 (NeMo-RL's floor), the packages in
# requirements.txt, this project editable, and NeMo-RL's source importable through a .pth file.
#
# Usage: ci/nemo_rl/build_env.sh VENV_DIR NEMO_RL_SRC
# Exit codes: 0 built; 3 no Python 3.13 on this machine; anything else: a real failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="$1"
src="$(cd "$2" && pwd)"

source ci/python313.sh

if ! python313="$(find_python313)"; then
    echo "no Python 3.13 interpreter found (PATH or pyenv); NeMo-RL needs >= 3.13" >&2
    exit 3
fi
echo "NeMo-RL env: $python313, NeMo-RL source $src"
uv venv --quiet --allow-existing --python "$python313" "$venv"
# --no-config: the project's own [tool.uv] settings (its transformers override among them) are
# for the main environment; this one follows NeMo-RL's pins alone.
VIRTUAL_ENV="$venv" uv pip install --quiet --no-config -r ci/nemo_rl/requirements.txt -e .
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$src" > "$site/nemo_rl_snapshot.pth"
# Fail here, with NeMo-RL's own message, if its modules the tests drive do not import.
"$venv/bin/python" -c 'import nemo_rl.algorithms.grpo, nemo_rl.experience.rollouts, nemo_rl.environments.math_environment'

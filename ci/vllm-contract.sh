#!/usr/bin/env bash
# ci/vllm-contract.sh — make vllm-contract: engines/vllm_contract.py once in
# each supported vLLM's environment, every one run even after a failure;
# exits 1 naming the releases whose contract failed (0 when all passed).
#
# Usage: ci/vllm-contract.sh MANAGER ENV...
#   MANAGER  the orbitkv-manager binary the script starts (bin/orbitkv-manager)
#   ENV      an environment under build/venv (vllm, vllm033), installed
#            first by engines/deps.sh (nothing when it matches its lock)
set -euo pipefail
cd "$(dirname "$0")/.."
manager=$1
shift
engines/deps.sh "$@"
failed=""
for env in "$@"; do
	if ! PYTHONPATH=python "build/venv/$env/bin/python" engines/vllm_contract.py --manager "$manager"; then
		failed="$failed $env"
	fi
done
if [ -n "$failed" ]; then
	echo "vllm-contract: FAILED in the environment(s):$failed"
	exit 1
fi

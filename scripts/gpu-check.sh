#!/bin/sh
# gpu-check.sh [MiB] - on a machine with an NVIDIA GPU: build rma and run
# tests/gpu/gpu_check (CUDA device memory registered, put and get through
# tcp and shm with staging, every byte checked; MiB is the largest
# transfer, default 256).  Exits as the check does: 0 pass, 1 fail, 77 no
# GPU or no CUDA driver.  Needs cmake, a C compiler and the CUDA headers
# ($CUDA_HOME/include); the driver is loaded at run time.
set -eu
cd "$(dirname "$0")/.."
build=${RMA_GPU_BUILD:-build-gpu}
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L || true
fi
cmake -S . -B "$build" -DBUILD_TESTING=ON -DRMA_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target gpu_check >/dev/null
if [ ! -x "$build/tests/gpu_check" ]; then
	echo "gpu-check: not built (CUDA headers not found; set CUDA_HOME)" >&2
	exit 77
fi
exec "$build/tests/gpu_check" "${1:-256}"

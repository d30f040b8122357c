#!/usr/bin/env bash
# Download, here (with network), the wheels that kernel recording needs on the lent GPU
# machine, which has no network, CuPy for CUDA 13 and PyTorch, but no cupti-python
# (../shared/GPU.md). benchmarks/gpu_check.sh installs them from build/gpu-wheels (git-ignored:
# build/) with `pip install --no-index --find-links build/gpu-wheels --target ...`.
#
#   bash benchmarks/fetch_gpu_wheels.sh                 # Python 3.11 and 3.12, CUDA 13
#   PY_VERSIONS="3.11" bash benchmarks/fetch_gpu_wheels.sh
#
# What `import cupti` needs (cupti-python 13.x's Requires-Dist, checked by importing it):
#   cupti-python      the bindings (one wheel per Python version)
#   cuda-bindings     imported by cupti.cupti at import time (per Python version)
#   cuda-pathfinder   finds libcupti.so (pure Python)
#   pyelftools        imported at import time (pure Python)
#   nvidia-cuda-cupti libcupti.so itself: PyTorch's image has one for its own profiler, maybe of
#                     an older 13.x; ours is fetched --no-deps so that the versions match.
# numpy is in the image. Everything is fetched --no-deps: only these, for manylinux x86_64.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${DEST:-build/gpu-wheels}"
# Two Python versions keep the folder near 40 MB (each adds ~15 MB); the image's is one of them
# in PyTorch's and NGC's recent images. Add 3.10 or 3.13 here if `python3 -V` there says so.
PY_VERSIONS="${PY_VERSIONS:-3.11 3.12}"
# cupti-python 13.N wants libcupti 13.N (its Requires-Dist: nvidia-cuda-cupti~=13.N): one pair.
CUPTI_SPEC="${CUPTI_SPEC:-cupti-python==13.4.*}"
LIBCUPTI_SPEC="${LIBCUPTI_SPEC:-nvidia-cuda-cupti==13.4.*}"
mkdir -p "$DEST"
git check-ignore -q "$DEST" || { echo "$DEST is not git-ignored: refusing to fill it" >&2; exit 1; }

fetch() {   # fetch PYVER SPEC...: binary wheels for that Python, no dependencies
    local py=$1
    shift
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$DEST" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_25_x86_64 \
        --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 --python-version "$py" --implementation cp "$@"
}

# The pure-Python wheels and libcupti once; the compiled bindings per Python version.
fetch 3.11 "cuda-pathfinder>=1.4.1" "pyelftools" "$LIBCUPTI_SPEC"
for py in $PY_VERSIONS; do
    fetch "$py" "$CUPTI_SPEC" "cuda-bindings>=13.0.2,<14"
    # What gradtrace itself needs there and the image lacks: msgspec (the torch-trace reader,
    # imported by the profiler package) and jsonschema with its needs (two profiler tests).
    fetch "$py" "msgspec>=0.18" "rpds-py"
done
fetch 3.11 "jsonschema>=4" "jsonschema-specifications" "referencing"
ls -la "$DEST"
du -sh "$DEST"

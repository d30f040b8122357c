#!/usr/bin/env bash
# The first minutes of a lent GPU (../shared/GPU.md): one script, in order of value, each
# step under its own time limit, every table and file under $OUT.
#
#   OUT=/path/to/out bash benchmarks/gpu_check.sh          # on the GPU machine (device `run`)
#   OUT=/tmp/x bash benchmarks/gpu_check.sh --dry-run      # on a CPU: the same steps, tiny
#                                                          # sizes, GPU-only steps skipped
#
# Before a GPU run: `bash benchmarks/fetch_gpu_wheels.sh` here (network), then the device `run`
# with carry ["build/gpu-wheels"] (git-ignored, ~42 MB): what the image lacks (msgspec,
# jsonschema, cupti-python for kernel recording). The device tool brings back 8 files: run
# with GPU_CHECK_PACK=1 (summary.txt and one archive). A rerun after fixes: ONLY=step,step
# and CUDA_TESTS="test files" / FULL_TESTS="test dirs" narrow it.
#
#   GPU_CHECK_PACK=1 GPU_CHECK_BUDGET=390 PYTHONUNBUFFERED=1 bash benchmarks/gpu_check.sh
#
# Runs from the repository root without installing the project (PYTHONPATH=., as the device
# machine has no dash or plotly). Each step's output goes to $OUT/<step>.log; $OUT/summary.txt
# lists every step with its exit status (or why it was skipped). The script itself exits 0 so
# that whatever ran comes back; read summary.txt.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-./gpu-check-out}"
mkdir -p "$OUT"
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
# The project is not installed there (no network, no dash): a folder `gradtrace` of links to
# this checkout's packages gives them their installed names (as tests/conftest.py does).
LINKS=$(mktemp -d /tmp/gradtrace-links-XXXX)
mkdir "$LINKS/gradtrace"
for pkg in autograd profiler viewer cli; do ln -s "$PWD/$pkg" "$LINKS/gradtrace/$pkg"; done
export PYTHONPATH="$LINKS:$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The device tool brings back at most 8 files from $OUT: with GPU_CHECK_PACK=1 every step
# works in a folder of its own and $OUT gets summary.txt and one archive of the rest,
# refreshed after each step so that a run stopped at its limit still brings back what ran.
FINAL_OUT=""
if [[ "${GPU_CHECK_PACK:-0}" == 1 ]]; then
    FINAL_OUT="$OUT"
    OUT=$(mktemp -d /tmp/gpu-check-work-XXXX)
fi
pack() {
    [[ -n $FINAL_OUT ]] || return 0
    cp "$SUMMARY" "$FINAL_OUT/summary.txt"
    tar czf "$FINAL_OUT/gpu-check.tgz" -C "$OUT" . 2>/dev/null
}
# ONLY=step1,step2 runs those steps alone (a rerun after fixes); the others say so.
ONLY="${ONLY:-}"
export GRADTRACE_BENCH_RESULTS="$OUT/results"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

HAVE_GPU=0
if [[ $DRY == 0 ]] && python3 -c "import cupy, sys; sys.exit(cupy.cuda.runtime.getDeviceCount() < 1)" 2>/dev/null; then
    HAVE_GPU=1
fi
DEVICE=cpu
[[ $HAVE_GPU == 1 ]] && DEVICE=cuda

# The whole script stays inside one device call (10 minutes at most) with room for a rerun
# of the device's 15 minutes: steps that would overrun the budget are skipped and say so.
BUDGET="${GPU_CHECK_BUDGET:-420}"

# step NAME LIMIT_S NEEDS_GPU COMMAND...: run COMMAND with a time limit, log it, note the result.
step() {
    local name=$1 limit=$2 needs_gpu=$3
    shift 3
    if [[ -n $ONLY && ",$ONLY," != *",$name,"* ]]; then
        echo "$name: skipped (not in ONLY)" >> "$SUMMARY"
        return
    fi
    if [[ $needs_gpu == gpu && $HAVE_GPU == 0 ]]; then
        echo "$name: skipped (no GPU)" >> "$SUMMARY"
        return
    fi
    local left=$((BUDGET - SECONDS))
    if (( left < 10 )); then
        echo "$name: skipped (budget of ${BUDGET}s spent)" >> "$SUMMARY"
        return
    fi
    (( limit > left )) && limit=$left
    echo "== $name (limit ${limit}s)"
    local t0=$SECONDS
    timeout --kill-after=5 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: rc=$rc in $((SECONDS - t0))s" >> "$SUMMARY"
    tail -n 25 "$OUT/$name.log"
    pack
}

QUICK=()
[[ $HAVE_GPU == 0 ]] && QUICK=(--quick)

# 1. What the machine is.
step environment 20 any bash -c 'nvidia-smi || true; python3 -c "import numpy; print(\"numpy\", numpy.__version__)";
    python3 -c "import cupy; print(\"cupy\", cupy.__version__, cupy.cuda.runtime.getDeviceCount(), \"devices\")" || true;
    python3 -c "import torch; print(\"torch\", torch.__version__, torch.cuda.is_available())" || true'
# 1b. What the image lacks, from build/gpu-wheels (benchmarks/fetch_gpu_wheels.sh, run where
#     there is network; the machine has none): msgspec (the profiler package imports the
#     torch-trace reader), jsonschema (two tests) and cupti-python for kernel recording, each
#     installed only where missing, into a folder of its own (not $OUT: ~100 MB) put on
#     PYTHONPATH for every step after.
wheels_setup() {
    local site=/tmp/gradtrace-wheels-site wanted=()
    python3 -c "import msgspec" 2>/dev/null || wanted+=(msgspec)
    python3 -c "import jsonschema" 2>/dev/null || wanted+=(jsonschema jsonschema-specifications referencing rpds-py)
    # cupti-python imports cuda.bindings and cuda.pathfinder: the image's are used where present.
    python3 -c "from cupti import cupti" 2>/dev/null || wanted+=(cupti-python pyelftools nvidia-cuda-cupti)
    python3 -c "import cuda.bindings, cuda.pathfinder" 2>/dev/null || wanted+=(cuda-bindings cuda-pathfinder)
    if (( ${#wanted[@]} == 0 )); then
        echo "wheels: nothing missing" >> "$SUMMARY"
        return
    fi
    if [[ ! -d build/gpu-wheels ]]; then
        echo "wheels: missing ${wanted[*]} (no build/gpu-wheels: run benchmarks/fetch_gpu_wheels.sh before)" >> "$SUMMARY"
        return
    fi
    timeout 90 python3 -m pip install --quiet --no-index --no-deps --no-compile --find-links build/gpu-wheels \
        --target "$site" "${wanted[@]}" > "$OUT/wheels.log" 2>&1
    export PYTHONPATH="$PYTHONPATH:$site"
    if python3 -c "import msgspec, jsonschema; from cupti import cupti" >> "$OUT/wheels.log" 2>&1; then
        echo "wheels: installed ${wanted[*]} from build/gpu-wheels" >> "$SUMMARY"
    else
        echo "wheels: install of ${wanted[*]} failed (see wheels.log)" >> "$SUMMARY"
    fi
}
if [[ $HAVE_GPU == 1 ]]; then wheels_setup; else echo "wheels: skipped (no GPU)" >> "$SUMMARY"; fi
# 2. The cuda tests, on the real GPU (a skipped cuda test there is a failure to explain): all
#    of them, not -x, so that one run shows every failure; the slowest listed.
#    Not -q: a file per line, so that a run stopped at its limit still shows where it failed;
#    one hung test costs 60 s, not the budget, where pytest-timeout is installed (the image has it).
PER_TEST=()
python3 -c "import pytest_timeout" 2>/dev/null && PER_TEST=(--timeout=60)
step cuda_tests "${CUDA_TESTS_LIMIT:-200}" gpu python3 -m pytest -m cuda ${CUDA_TESTS:-tests/autograd tests/profiler} \
    -rfEs --maxfail=60 --durations=15 "${PER_TEST[@]}" -p no:cacheprovider -p no:randomly
# 2b. Kernel recording (CUPTI) of a small training step: the profile comes back in $OUT, with
#     `gradtrace gpu` and `--kernels` on it; checks the clock alignment and the invariants.
step kernel_recording 60 gpu python3 benchmarks/kernel_recording_check.py --out "$OUT/kernels.gtprof"
# 3. Profiler truth: Σ self CUDA = top-level CUDA, CUDA within 10% of (never above) the
#    event-timed step; overhead on a launch-bound step.
step profiler_truth 60 any python3 benchmarks/profiler_truth.py --device "$DEVICE" "${QUICK[@]}" \
    --json "$OUT/profiler_truth.json"
# 4. Real torch.profiler CUDA traces (plain, CUDA graph, stack+memory) for the importer's tests.
step torch_traces 60 any python3 benchmarks/record_torch_gpu_traces.py --out "$OUT/traces"
# 5. Speed against PyTorch CUDA eager, compiled autograd's CUDA-graph replay, memory.
step train_step 80 gpu python3 benchmarks/train_step.py --device cuda --repeats 7 \
    --json "$OUT/train_step.json"
# 5a. Host time per op (raw CuPy, gradtrace, PyTorch) and a cProfile of the MLP step: the
#     first H200 run found the training steps host-bound, 2.7-4.9x PyTorch CUDA's time.
HOST_ARGS=(--device "$DEVICE")
[[ $HAVE_GPU == 0 ]] && HOST_ARGS=(--device cpu --ops 200 --steps 3)
step host_overhead 40 any python3 benchmarks/host_overhead.py "${HOST_ARGS[@]}" --json "$OUT/host_overhead.json"
# 5b. Which CuPy calls a CUDA-graph capture takes (compiled autograd falls back when one is refused).
step graph_probe 30 gpu python3 benchmarks/cuda_graph_probe.py
step compiled_backward 60 gpu python3 benchmarks/compiled_backward.py --device cuda --repeats 7 \
    --min-time 1 --json "$OUT/compiled_backward.json"
# On a CPU (the dry run) a tiny model: the script runs there too, so it cannot rot unseen.
MEMORY_ARGS=(--device cuda --repeats 2)
[[ $HAVE_GPU == 0 ]] && MEMORY_ARGS=(--device cpu --repeats 1 --layers 4 --width 64 --batch 16)
step memory 30 any python3 benchmarks/memory.py "${MEMORY_ARGS[@]}" --json "$OUT/memory.json"
# 6. The whole suite with the GPU present (cuda tests included), if time is left.
step full_tests 240 gpu python3 -m pytest ${FULL_TESTS:-tests/autograd tests/profiler} -q -x -p no:cacheprovider

echo "== summary"
cat "$SUMMARY"
pack
exit 0

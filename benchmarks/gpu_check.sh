#!/usr/bin/env bash
# The first minutes of a lent GPU (../shared/GPU.md): one script, in order of value, each
# step under its own time limit, every table and file under $OUT.
#
#   OUT=/path/to/out bash benchmarks/gpu_check.sh          # on the GPU machine (device `run`)
#   OUT=/tmp/x bash benchmarks/gpu_check.sh --dry-run      # on a CPU: the same steps, tiny
#                                                          # sizes, GPU-only steps skipped
#
# Before a GPU run: `bash benchmarks/fetch_gpu_wheels.sh` here (network), then the device `run`
# with carry ["build/gpu-wheels"] (git-ignored, ~41 MB): cupti-python for kernel recording.
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
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
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
}

QUICK=()
[[ $HAVE_GPU == 0 ]] && QUICK=(--quick)

# 1. What the machine is.
step environment 20 any bash -c 'nvidia-smi || true; python3 -c "import numpy; print(\"numpy\", numpy.__version__)";
    python3 -c "import cupy; print(\"cupy\", cupy.__version__, cupy.cuda.runtime.getDeviceCount(), \"devices\")" || true;
    python3 -c "import torch; print(\"torch\", torch.__version__, torch.cuda.is_available())" || true'
# 1b. cupti-python for kernel recording: the machine has no network, so it comes from
#     build/gpu-wheels (benchmarks/fetch_gpu_wheels.sh, run where there is network), installed
#     into a folder of its own (not $OUT: ~100 MB) put on PYTHONPATH for every step after.
cupti_setup() {
    if python3 -c "from cupti import cupti" 2>/dev/null; then
        echo "cupti: already importable" >> "$SUMMARY"
    elif [[ -d build/gpu-wheels ]]; then
        local site=/tmp/gradtrace-cupti-site
        timeout 90 python3 -m pip install --quiet --no-index --no-deps --find-links build/gpu-wheels \
            --target "$site" cupti-python cuda-bindings cuda-pathfinder pyelftools nvidia-cuda-cupti \
            > "$OUT/cupti.log" 2>&1
        export PYTHONPATH="$PYTHONPATH:$site"
        if python3 -c "from cupti import cupti" >> "$OUT/cupti.log" 2>&1; then
            echo "cupti: installed from build/gpu-wheels" >> "$SUMMARY"
        else
            echo "cupti: install failed (see cupti.log)" >> "$SUMMARY"
        fi
    else
        echo "cupti: missing (no build/gpu-wheels: run benchmarks/fetch_gpu_wheels.sh before)" >> "$SUMMARY"
    fi
}
if [[ $HAVE_GPU == 1 ]]; then cupti_setup; else echo "cupti: skipped (no GPU)" >> "$SUMMARY"; fi
# 1c. Kernel recording (CUPTI) of a small training step: the profile comes back in $OUT, with
#     `gradtrace gpu` and `--kernels` on it; checks the clock alignment and the invariants.
step kernel_recording 60 gpu python3 benchmarks/kernel_recording_check.py --out "$OUT/kernels.gtprof"
# 2. The cuda tests, on the real GPU (a skipped cuda test there is a failure to explain).
step cuda_tests 150 gpu python3 -m pytest -m cuda tests/autograd tests/profiler -x -q -rs -p no:cacheprovider
# 3. Profiler truth: Σ self CUDA = top-level CUDA, CUDA within 10% of (never above) the
#    event-timed step; overhead on a launch-bound step.
step profiler_truth 60 any python3 benchmarks/profiler_truth.py --device "$DEVICE" "${QUICK[@]}" \
    --json "$OUT/profiler_truth.json"
# 4. Real torch.profiler CUDA traces (plain, CUDA graph, stack+memory) for the importer's tests.
step torch_traces 60 any python3 benchmarks/record_torch_gpu_traces.py --out "$OUT/traces"
# 5. Speed against PyTorch CUDA eager, compiled autograd's CUDA-graph replay, memory.
step train_step 80 gpu python3 benchmarks/train_step.py --device cuda --repeats 7 \
    --json "$OUT/train_step.json"
step compiled_backward 60 gpu python3 benchmarks/compiled_backward.py --device cuda --repeats 7 \
    --min-time 1 --json "$OUT/compiled_backward.json"
step memory 30 gpu python3 benchmarks/memory.py --device cuda --repeats 2 --json "$OUT/memory.json"
# 6. The whole suite with the GPU present (cuda tests included), if time is left.
step full_tests 240 gpu python3 -m pytest tests/autograd tests/profiler -q -x -p no:cacheprovider

echo "== summary"
cat "$SUMMARY"
exit 0

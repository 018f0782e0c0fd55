#!/bin/bash
# The GPU run of ../shared/GPU.md as one command for a lent device machine:
#   bash dev/gpu_check.sh            (from the repository root, with $OUT set)
# Every step's screen, JSON and JUnit go into one tarball, $OUT/gpu.tar.gz (the device tool
# brings back at most 8 files); stdout carries a line per step (rc, wall seconds, the
# answer line) so that the tool's output tail is a summary. Steps run in order of what
# matters most; past DEADLINE seconds the rest are skipped, and the tarball is still made.
# ONLY="auto2 launched2" runs only those steps (a rerun after a fix, on little device time).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 COLUMNS=80 NO_COLOR=1
DEADLINE=${DEADLINE:-330}
R=$(mktemp -d)/gpu
mkdir -p "$R"
T0=$(date +%s)
py=python3

pack() { tar -C "$(dirname "$R")" -czf "$OUT/gpu.tar.gz" gpu; }
trap pack EXIT

# step NAME LIMIT CMD...: run with a limit, screen into $R/NAME.txt, a summary line here.
step() {
    local name=$1 limit=$2; shift 2
    if [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]]; then return; fi
    if (( $(date +%s) - T0 > DEADLINE )); then echo "### $name: skipped (deadline)"; return; fi
    local s; s=$(date +%s.%N)
    timeout -k 5 "$limit" "$@" >"$R/$name.txt" 2>&1
    local rc=$?
    printf '### %s rc=%s wall=%.1fs: %s\n' "$name" "$rc" "$(awk -v a="$s" -v b="$(date +%s.%N)" "BEGIN{print b-a}")" "$*"
    grep -E '^(✓|✗|!|envcheck:)|Traceback|Error' "$R/$name.txt" | head -4
}

{
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
    $py -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.get_arch_list())"
    nproc; uname -a
} >"$R/env.txt" 2>&1
head -3 "$R/env.txt"; tail -3 "$R/env.txt"

ec="$py -m envcheck"
probes=dev/gpu/probes.py
faults=dev/gpu/faults.py

# Lane B, beside lane A (the GPU is shared; neither times anything; torchrun --standalone takes a free port): real failure logs made
# on this GPU, each read by explain. Its summary goes to $R/laneB.log, printed at the end.
fault() {  # fault NAME NPROC [ENV=V...]: torchrun a mode of faults.py, then explain its log
    local name=$1 n=$2; shift 2
    step "log_$name" 150 env "$@" torchrun --standalone --nproc-per-node "$n" "$faults" "${name%_*}"
    step "explain_$name" 30 $ec explain "$R/log_$name.txt"
    sed -n 3p "$R/explain_$name.txt" 2>/dev/null
}
(
    fault healthy 1 NCCL_DEBUG=INFO
    fault dup 2 NCCL_DEBUG=INFO TORCH_NCCL_BLOCKING_WAIT=1
    fault ordinal 1
    fault oom 1
    fault assert 1
    fault watchdog 1
    fault ifname 1 NCCL_SOCKET_IFNAME=nosuchif0
    fault illegal 1
    fault fork 1
    fault nogpu 1 CUDA_VISIBLE_DEVICES=1
    fault netib 1 NCCL_NET=IB
    fault nccloom 1
    fault cublasoom 1
    fault cudnnoom 1
    fault noimage 1
    fault healthy_all 1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL TORCH_CPP_LOG_LEVEL=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL
    step log_save 60 $py "$faults" save "$R/cuda.pt"
    step log_load 60 env CUDA_VISIBLE_DEVICES= $py "$faults" load "$R/cuda.pt"
    step explain_load 30 $ec explain "$R/log_load.txt"
    sed -n 3p "$R/explain_load.txt" 2>/dev/null
) >"$R/laneB.log" 2>&1 &
laneB=$!

# Lane A: envcheck itself, most important first.
step default 200 $ec run -v --json "$R/default.json" --junit "$R/default.xml" --metrics "$R/default.prom"
# NCCL asked for more ranks than GPUs: refused (exit 2) before any rank starts
step nccl2 60 $ec run --backend nccl --nproc 2 -v --json "$R/nccl2.json"
# a kernel that never ends: the hang named with its stack, the rank killed, the GPU freed
step gpuhang 90 $ec run --nproc 1 -p gpustuck --probe-path $probes --timeout 10 -v --json "$R/gpuhang.json"
# auto with more ranks than GPUs: one backend on every rank (gloo), no hang
step auto2 150 $ec run --nproc 2 -v --json "$R/auto2.json"
step launched2 150 torchrun --nproc-per-node 2 -m envcheck.worker.launched --out /tmp/ec-launch2 --json "$R/launched2.json"
# a hang under torchrun on a CUDA build (gloo ranks forked from the host zygote)
step launchhang 120 torchrun --nproc-per-node 4 -m envcheck.worker.launched --out /tmp/ec-hang -p stuck --probe-path $probes --timeout 5
step launchhang_report 30 $ec report --records /tmp/ec-hang --json "$R/launchhang.json"
step mesh1 120 $ec run --nproc 1 -p mesh --mesh dp_shard=1 -v --json "$R/mesh1.json"
step mesh4 150 $ec run --nproc 4 --backend gloo -p mesh --mesh dp_shard=2,tp=2 -v --json "$R/mesh4.json"
step check 30 $ec check "torch==$($py -c 'import torch; print(torch.__version__)')" --json "$R/check.json"
step check_suggest 30 $ec check --suggest
step nogpu 90 env CUDA_VISIBLE_DEVICES= $ec run -p launch -p collectives -v --json "$R/nogpu.json"
step fsdp 150 $ec run --nproc 1 -p fsdp -v --json "$R/fsdp.json"
step model 150 $ec run --nproc 1 -p serialization -p checkpoint --model dev/models/mymodels/stdit.py:build_model -v --json "$R/model.json"
step launched1 120 torchrun --nproc-per-node 1 -m envcheck.worker.launched --out /tmp/ec-launch --json "$R/launched1.json"
step badif 120 env NCCL_SOCKET_IFNAME=nosuchif0 $ec run --nproc 1 -p collectives -p nccl --timeout 30 -v --json "$R/badif.json"
step lightning 150 $ec run --nproc 1 -p frameworks --framework lightning -v --json "$R/lightning.json"

wait "$laneB"
cat "$R/laneB.log"
# Nothing envcheck started may outlive it, nor hold the GPU.
{ echo "gpu apps:"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  echo "processes:"; ps -eo pid,ppid,etimes,args | grep -E 'envcheck|torchrun|faults.py' | grep -v grep; } \
    >"$R/left.txt" 2>&1
cat "$R/left.txt"
$py dev/gpu/summary.py "$R"
echo "### total $(( $(date +%s) - T0 ))s"

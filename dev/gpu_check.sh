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
DEADLINE=${DEADLINE:-400}
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
step default 200 $ec run -v --json "$R/default.json" --junit "$R/default.xml"
# NCCL asked for more ranks than GPUs: refused (exit 2) before any rank starts
step nccl2 60 $ec run --backend nccl --nproc 2 -v --json "$R/nccl2.json"
# auto with more ranks than GPUs: one backend on every rank (gloo), no hang
step auto2 150 $ec run --nproc 2 -v --json "$R/auto2.json"
step launched2 150 torchrun --nproc-per-node 2 -m envcheck.worker.launched --out /tmp/ec-launch2 --json "$R/launched2.json"
step check 30 $ec check "torch==$($py -c 'import torch; print(torch.__version__)')" --json "$R/check.json"
step check_suggest 30 $ec check --suggest
step nogpu 90 env CUDA_VISIBLE_DEVICES= $ec run -p launch -p collectives -v --json "$R/nogpu.json"
step narrowed 90 env CUDA_VISIBLE_DEVICES=0 $ec run -p launch -p nccl -v --json "$R/narrowed.json"
step launched1 120 torchrun --nproc-per-node 1 -m envcheck.worker.launched --out /tmp/ec-launch --json "$R/launched1.json"
step fsdp 150 $ec run --nproc 1 -p fsdp -v --json "$R/fsdp.json"
step lightning 150 $ec run --nproc 1 -p frameworks --framework lightning -v --json "$R/lightning.json"
step gloo2 120 $ec run --backend gloo --nproc 2 -v --json "$R/gloo2.json"
step model 150 $ec run --nproc 1 -p serialization -p checkpoint --model dev/models/mymodels/stdit.py:build_model -v --json "$R/model.json"
step badif 120 env NCCL_SOCKET_IFNAME=nosuchif0 $ec run --nproc 1 -p collectives -p nccl --timeout 30 -v --json "$R/badif.json"

# Real NCCL failure logs from this hardware, for explain: two ranks on one GPU (nobody
# called set_device), and a rank asking for a GPU that is not there.
cat >"$R/dup.py" <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
dev = int(os.environ.get("EC_DEVICE", "0"))
t = torch.ones(4, device=f"cuda:{dev}")
dist.all_reduce(t)
torch.cuda.synchronize()
print("rank", dist.get_rank(), "sum", t[0].item())
dist.destroy_process_group()
EOF
step dup_log 90 env NCCL_DEBUG=INFO TORCH_NCCL_BLOCKING_WAIT=1 torchrun --nproc-per-node 2 "$R/dup.py"
step dup_explain 30 $ec explain "$R/dup_log.txt"
step ordinal_log 90 env EC_DEVICE=1 torchrun --nproc-per-node 1 "$R/dup.py"
step ordinal_explain 30 $ec explain "$R/ordinal_log.txt"
echo "### total $(( $(date +%s) - T0 ))s"

"""Real failures made on a GPU, for `envcheck explain` (dev/gpu_check.sh runs each under
torchrun and keeps its whole log): python faults.py MODE [PATH].

  healthy   two NCCL all_reduces that pass (the log explain must find nothing in)
  dup       every rank on cuda:0 (two ranks: NCCL's duplicate GPU)
  ordinal   a rank asks for cuda:1 on a one-GPU machine
  oom       an allocation larger than the GPU
  assert    an embedding index out of range: a device-side assert
  watchdog  an all_reduce queued behind a kernel that never ends, under a 5 s timeout
  save      saves a CUDA tensor to PATH;  load: loads PATH (run it with no GPU visible)
  ifname    init with NCCL_SOCKET_IFNAME naming no interface (set by the caller)
  illegal   a kernel (CuPy's, in torch's CUDA context) writes to address 64
  fork      CUDA used, then a forked child (multiprocessing's default on Linux) uses it
  nogpu     set_device(0) where CUDA_VISIBLE_DEVICES (set by the caller) hides every GPU
  netib     an all_reduce with NCCL_NET=IB (set by the caller) on a host with no InfiniBand
  nccloom   the GPU's memory taken by the program, then NCCL's first all_reduce
  cublasoom the GPU's memory taken, then the first matrix product (cuBLAS's handle)
  cudnnoom  the GPU's memory taken, then the first convolution (cuDNN's handle)
  noimage   a CUDA extension built for sm_80 alone (TORCH_CUDA_ARCH_LIST=8.0), run on
            a newer GPU: its kernel has no image for it
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def _nccl(timeout=60):
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout))


def _fill():
    """Every free byte of the GPU, in smaller blocks as it runs out; torch's cache emptied
    so that what CUDA itself has left is nothing."""
    hold, block = [], 1 << 30
    while block >= 1 << 20:
        try:
            hold.append(torch.empty(block, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            block //= 2
    torch.cuda.empty_cache()
    return hold


def _child():
    torch.ones(1, device="cuda")


def main(mode, path=None):
    if mode in ("healthy", "ifname", "netib", "nogpu"):
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        _nccl()
        t = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(t)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        print("rank", dist.get_rank(), "sum", t[0].item(), flush=True)
        dist.destroy_process_group()
    elif mode in ("dup", "ordinal"):
        _nccl()
        t = torch.ones(4, device="cuda:%d" % (1 if mode == "ordinal" else 0))
        dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.destroy_process_group()
    elif mode == "oom":
        free, total = torch.cuda.mem_get_info()
        keep = torch.empty(free // 2, dtype=torch.uint8, device="cuda")
        more = torch.empty(total, dtype=torch.uint8, device="cuda")
        print(keep.numel(), more.numel())
    elif mode == "assert":
        weight = torch.zeros(5, 3, device="cuda")
        out = torch.nn.functional.embedding(torch.tensor([10], device="cuda"), weight)
        torch.cuda.synchronize()
        print(out)
    elif mode == "watchdog":
        torch.cuda.set_device(0)
        _nccl(timeout=5)
        t = torch.ones(4, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        torch.cuda._sleep(1 << 40)  # minutes of GPU cycles ahead of the collective
        dist.all_reduce(t)
        torch.cuda.synchronize()
    elif mode == "illegal":
        import cupy
        import numpy
        poke = cupy.RawKernel(
            r'extern "C" __global__ void poke(long long* p) { p[threadIdx.x] = 1; }', "poke")
        torch.ones(1, device="cuda")
        poke((1,), (32,), (numpy.uint64(64),))
        torch.cuda.synchronize()
    elif mode == "fork":
        import multiprocessing
        torch.ones(1, device="cuda")
        child = multiprocessing.get_context("fork").Process(target=_child)
        child.start()
        child.join()
        raise SystemExit(child.exitcode)
    elif mode == "nccloom":
        torch.cuda.set_device(0)
        _nccl()
        t = torch.ones(4, device="cuda")
        hold = _fill()
        dist.all_reduce(t)  # NCCL's communicator is made here, with no memory left
        torch.cuda.synchronize()
    elif mode in ("cublasoom", "cudnnoom"):
        a = torch.ones(64, 64, device="cuda")
        x = torch.ones(1, 3, 32, 32, device="cuda")
        w = torch.ones(8, 3, 3, 3, device="cuda")
        hold = _fill()
        if mode == "cublasoom":
            print((a @ a).sum().item(), len(hold))
        else:
            print(torch.nn.functional.conv2d(x, w).sum().item(), len(hold))
    elif mode == "noimage":
        from torch.utils.cpp_extension import load_inline
        os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0"
        cuda = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
__global__ void bump_kernel(float* p) { p[threadIdx.x] += 1; }
torch::Tensor bump(torch::Tensor t) {
  bump_kernel<<<1, t.numel()>>>(t.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return t;
}
"""
        ext = load_inline("ec_noimage", cpp_sources="torch::Tensor bump(torch::Tensor t);",
                          cuda_sources=cuda, functions=["bump"])
        print(ext.bump(torch.zeros(4, device="cuda")))
        torch.cuda.synchronize()
    elif mode == "save":
        torch.save({"w": torch.ones(4, device="cuda")}, path)
    elif mode == "load":
        print(torch.load(path)["w"])
    else:
        raise SystemExit("unknown mode %r" % mode)


if __name__ == "__main__":
    main(*sys.argv[1:])

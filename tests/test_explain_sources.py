"""The wordings the signatures were widened to from the sources of the error texts
(issue #34, phase A of batch 4): torch's, NCCL's and gloo's own messages, as their
format strings print them, in each release that changed them.

These are not users' logs (those are in explain_corpus.toml and explain_unseen.toml):
each line is a format string of the named source file with its fields filled in, the
way the library prints it, so that a wording no user has posted yet is still known.
"""

import pytest

from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load

# (source of the format string, the line as printed, the signature it must name)
LINES = [
    # NCCL src/transport/net_ib.cc: 2.30's completion error names the status, then its number
    ("nccl net_ib.cc (2.30)",
     "h1:11:22 [0] transport/net_ib.cc:2470 NCCL WARN NET/IB: Got completion from peer "
     "10.0.0.2<43251> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128) "
     "vendor_err=129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0",
     "nccl.ib_completion_error"),
    ("nccl net_ib.cc GIN (2.28+)",
     "h1:11:22 [0] NCCL WARN NET/IB/GIN: Got completion from peer 10.0.0.2<43251> with "
     "status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_0",
     "nccl.ib_completion_error"),
    ("nccl net_ib.cc (2.30), status 4",
     "h1:11:22 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<43251> with "
     "status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=81 (Send) hca mlx5_0",
     "nccl.acs_gdr"),
    ("nccl net_ib.cc async event",
     "h1:11:22 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error",
     "nccl.ib_completion_error"),
    # NCCL src/misc/socket.cc (2.18-2.27) and src/os/linux.cc (2.28+): socket connects
    ("nccl socket.cc (2.18)",
     "h1:11:22 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
     "10.0.0.2<45763> failed : No route to host",
     "network.peer_connect"),
    ("nccl os/linux.cc (2.30)",
     "h1:11:22 [0] os/linux.cc:302 NCCL WARN ncclOsSocketStartConnect: connect to "
     "10.0.0.2<45763> failed : Connection refused",
     "network.peer_connect"),
    ("torch's 'Last error:' line (no NCCL prefix)",
     "socketStartConnect: Connect to 172.17.0.2<45763> failed : Software caused connection abort",
     "network.peer_connect"),
    # NCCL src/bootstrap.cc: a peer sent another size
    ("nccl bootstrap.cc",
     "h1:11:22 [1] bootstrap.cc:224 NCCL WARN Message truncated : received 1024 bytes instead of 256",
     "torch.collective_mismatch"),
    # NCCL src/include/checks.h: CUDA errors inside NCCL
    ("nccl checks.h", "h1:11:22 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
     "cuda.out_of_memory"),
    ("nccl checks.h, after torch's 'Last error:'", "Cuda failure 'invalid device ordinal'",
     "device.invalid_ordinal"),
    # CUDA runtime errors as torch raises them (c10/cuda/CUDAException.cpp)
    ("cuda runtime", "RuntimeError: CUDA error: out of memory", "cuda.out_of_memory"),
    ("cuda runtime",
     "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
     "cuda.driver_too_old"),
    ("cuda runtime", "RuntimeError: CUDA error: an uncorrectable NVLink error was detected during "
     "the execution", "cuda.gpu_hardware"),
    # torch/cuda/__init__.py _check_capability
    ("torch/cuda/__init__.py",
     "    PyTorch no longer supports this GPU because it is too old.", "cuda.no_kernel_image"),
    # torch/csrc/distributed/c10d/TCPStore.cpp and distributed_c10d.py
    ("TCPStore.cpp",
     "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
     "1/2 clients joined.", "rendezvous.unreachable"),
    ("distributed_c10d.py _store_based_barrier",
     "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
     "for key: store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:30:00)",
     "rendezvous.store_timeout"),
    ("torch 1.x c10d", "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
     "rendezvous.unreachable"),
    # torch/serialization.py and aten MapAllocator.cpp
    ("torch/_weights_only_unpickler.py",
     "WeightsUnpickler error: Unsupported global: GLOBAL numpy.core.multiarray._reconstruct "
     "was not an allowed global by default.", "torch.weights_only_load"),
    ("aten MapAllocator.cpp",
     "RuntimeError: unable to write to file </torch_1234_3571874089_0>: No space left on device (28)",
     "dataloader.shm"),
    # gloo/transport/tcp/pair.h and device.cc as torch raises them
    ("gloo pair.h",
     "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.h:311] Connect timeout "
     "[10.0.0.2]:35521", "network.peer_connect"),
    # NCCL src/misc/socket.cc: a peer that went away (a consequence)
    ("nccl socket.cc", "h1:11:22 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection "
     "closed by remote peer h2<57557>", "torch.peer_closed"),
]


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


@pytest.mark.parametrize("source,line,expect", LINES, ids=[x[0] + ":" + x[2] for x in LINES])
def test_source_wording_is_recognised(source, line, expect, tmp_path, matrix):
    log = tmp_path / "job.log"
    log.write_text(line + "\n", encoding="utf-8")
    result = command.explain([str(log)], matrix=matrix)
    assert [f.signature.id for f in result.findings][:1] == [expect], source

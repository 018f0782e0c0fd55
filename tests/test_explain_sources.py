"""The wordings the signatures were widened to from the sources of the error texts
(issue #34: phase A before batch 4, phase B after it): torch's, NCCL's, gloo's, CUDA's
and the launchers' own messages, as their format strings print them, in each release that
changed them; and the order rules phase B added (a cause that explains another, NCCL's
interface lines as a conditional cause).

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

# Phase B (after batch 4 was measured, issue #34). First the wordings of batch 4's misses,
# from their sources: torch's and nccl-tests' wrappers of NCCL's error strings, NCCL's
# interface lines, c10d's name lookup.
BATCH4_SOURCES = [
    # torch/csrc/cuda/nccl.cpp throw_nccl_error: "NCCL Error " << status << ": " <<
    # ncclGetErrorString(status); NCCL src/init.cc ncclGetErrorString (< 2.13: no hint)
    ("torch cuda/nccl.cpp, NCCL < 2.13", "RuntimeError: NCCL Error 2: unhandled system error",
     "nccl.system_error"),
    ("torch cuda/nccl.cpp, NCCL 2.13+",
     "RuntimeError: NCCL Error 1: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
     "nccl.cuda_error"),
    # torch NCCLUtils.hpp C10D_NCCL_CHECK and getNcclErrorDetailStr
    ("torch NCCLUtils.hpp",
     "[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
     "c10d/NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
     "NCCL version 2.20.5", "nccl.cuda_error"),
    ("torch getNcclErrorDetailStr", "ncclUnhandledCudaError: Call to CUDA function failed.",
     "nccl.cuda_error"),
    # nccl-tests src/common.h NCCLCHECK: "%s: Test NCCL failure %s:%d '%s / %s'"
    ("nccl-tests common.h",
     "node1: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO "
     "for details) / '", "nccl.system_error"),
    ("nccl-tests common.h (older)", "Test NCCL failure common.cu:777 'unhandled cuda error'",
     "nccl.cuda_error"),
    # NCCL transport/net_socket.cc, net_ib.cc and bootstrap.cc INFO lines: the interfaces
    # NCCL chose (" [%d]%s:%s" each), then the connect or system error they lead to
    ("nccl net_socket.cc 'NET/Socket : Using' with a connect failure",
     "h1:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]docker0:172.17.0.1<0>\n"
     "h1:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 172.17.0.2<45763> "
     "failed : No route to host", "nccl.socket_interface"),
    ("nccl net_ib.cc OOB interface with a system error",
     "h1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB br-3f2a9c1d0e4b:"
     "172.18.0.1<0>\n"
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
     "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), "
     "NCCL version 2.21.5", "nccl.socket_interface"),
    ("nccl bootstrap.cc (2.24+) with a connect failure",
     "h1:1:2 [0] NCCL INFO Bootstrap: Using veth1a2b3c4:172.17.0.5<0>\n"
     "h1:1:2 [0] NCCL WARN socketStartConnect: Connect to 172.17.0.9<43221> failed : "
     "Connection refused", "nccl.socket_interface"),
    # torch/csrc/distributed/c10d/socket.cpp: the name did not resolve, printed after the
    # connect that failed for want of it (EAI_NODATA's wording; the same rank's failure)
    ("c10d socket.cpp gai error after the connect",
     "[W socket.cpp:767] [c10d] The client socket has failed to connect to [node-1.cluster]:"
     "29500 (errno: 22 - Invalid argument).\n"
     "[W socket.cpp:767] [c10d] The IPv4 network addresses of (node-1.cluster, 29500) cannot "
     "be retrieved (gai error: -5 - No address associated with hostname).",
     "rendezvous.hostname"),
    ("python socket.gaierror", "socket.gaierror: [Errno -5] No address associated with hostname",
     "rendezvous.hostname"),
]
LINES += BATCH4_SOURCES



@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


@pytest.mark.parametrize("source,line,expect", LINES, ids=[x[0] + ":" + x[2] for x in LINES])
def test_source_wording_is_recognised(source, line, expect, tmp_path, matrix):
    log = tmp_path / "job.log"
    log.write_text(line + "\n", encoding="utf-8")
    result = command.explain([str(log)], matrix=matrix)
    assert [f.signature.id for f in result.findings][:1] == [expect], source


def _first(text, tmp_path, matrix):
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    result = command.explain([str(log)], matrix=matrix)
    return [f.signature.id for f in result.findings], result


NET_SOCKET_DOCKER = ("h1:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> "
                     "[1]docker0:172.17.0.1<0>\n")
CONNECT = ("[rank{r}]:[W socket.cpp:767] [c10d] The client socket has failed to connect to "
           "[node-1.cluster]:29500 (errno: 22 - Invalid argument).\n")
GAI = ("[rank{r}]:[W socket.cpp:767] [c10d] The IPv6 network addresses of (node-1.cluster, "
       "29500) cannot be retrieved (gai error: -2 - Name or service not known).\n")


def test_nccl_interface_lines_alone_are_no_cause(tmp_path, matrix):
    """Every working job with NCCL_DEBUG=INFO prints the interfaces NCCL chose."""
    found, result = _first(NET_SOCKET_DOCKER + "h1:1:2 [0] NCCL INFO Bootstrap : Using "
                           "lo:127.0.0.1<0>\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_nccl_interface_lines_come_after_a_cause_a_line_states(tmp_path, matrix):
    found, _ = _first(NET_SOCKET_DOCKER
                      + "h1:1:2 [0] NCCL WARN Error while creating shared memory segment "
                      "/dev/shm/nccl-c8G2vd (size 5767520)\n"
                      "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG="
                      "INFO for details), NCCL version 2.20.5\n", tmp_path, matrix)
    assert found[:1] == ["nccl.shm_full"]


def test_interfaces_listed_on_lines_of_their_own_are_read(tmp_path, matrix):
    """A pasted log that broke NCCL's interface list onto lines of its own (nccl#697)."""
    found, _ = _first("NCCL INFO NET/Socket : Using\n[0]bond0:192.168.1.161<0>\n"
                      "[1]br-05ab815fa14e:172.19.0.1<0>\n"
                      "ncclSystemError: System call (socket, malloc, munmap, etc) failed.\n",
                      tmp_path, matrix)
    assert found[:1] == ["nccl.socket_interface"]


def test_a_name_that_does_not_resolve_explains_the_same_ranks_connect(tmp_path, matrix):
    """c10d prints the failed connect before the lookup's error (monarch#1571's order): on
    the same rank the name is the cause; on another rank it is another failure."""
    found, result = _first(CONNECT.format(r=0) + GAI.format(r=0), tmp_path, matrix)
    assert found == ["rendezvous.hostname"]
    assert [f.signature.id for f in result.consequences] == ["rendezvous.unreachable"]
    found, _ = _first(CONNECT.format(r=0) + GAI.format(r=1), tmp_path, matrix)
    assert found == ["rendezvous.unreachable", "rendezvous.hostname"]

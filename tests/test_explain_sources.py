"""The wordings the signatures were widened to from the sources of the error texts
(issue #34: phase A before batch 4, phase B after it, phase C after batch 5, phases D to
K after each later batch, J from the sources alone): torch's, NCCL's, gloo's, CUDA's, the
launchers', the crash handlers' and CPython's own messages, as their format strings print
them, in each release that changed them; and the order rules the phases added (a cause
that explains another, NCCL's interface lines and torch's loopback fallback as conditional
causes).

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
    # NCCL src/init.cc: a communicator's init lines (2.19 on; later releases name the
    # function, then the rank, before 'comm'), and then nothing: a guess (phase S)
    ("nccl init.cc, init done",
     "h1:11:22 [0] NCCL INFO comm 0x55d4c0a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 47000 "
     "commId 0x47dc53f08cbcda96 - Init COMPLETE", "nccl.p2p_hang"),
    ("nccl init.cc, init begun, with the function's name",
     "h1:11:22 [1] NCCL INFO ncclCommInitRankConfig comm 0x55d4c0a0 rank 1 nranks 2 cudaDev 1 "
     "nvmlDev 1 busId 4f000 commId 0x47dc53f08cbcda96 - Init START", "nccl.p2p_hang"),
    ("nccl init.cc, init begun, with its rank",
     "h1:11:22 [1] NCCL INFO [Rank 1] ncclCommInitRankConfig comm 0x55d4c0a0 rank 1 nranks 2 "
     "cudaDev 1 nvmlDev 1 busId 4f000 commId 0x47dc53f08cbcda96 - Init START", "nccl.p2p_hang"),
    # phase T: accelerate's own refusal of a taken port (accelerate/utils/launch.py)
    ("accelerate utils/launch.py",
     "ConnectionError: Tried to launch distributed communication on port `29500`, but another "
     "process is utilizing it. Please specify a different port (such as using the "
     "`--main_process_port` flag or specifying a different `main_process_port` in your config "
     "file) and rerun your script. To automatically use the next open port (on a single node), "
     "you can set this to `0`.", "rendezvous.port_in_use"),
    # gloo's device.cc as some builds and wrappers print it, without the enforce's location
    ("gloo device.cc, its condition, no location",
     "RuntimeError: ifa != nullptr. Unable to find address for: 192.168.99.",
     "gloo.socket_interface"),
    ("gloo device.cc, alone, a predictable interface name",
     "RuntimeError: Unable to find address for: enp67s0f5", "gloo.socket_interface"),
    ("gloo device.cc, alone, NCCL's exclusion syntax",
     "RuntimeError: Unable to find address for: ^lo,docker", "gloo.socket_interface"),
    # Meta's Llama code (llama/generation.py Llama.build; LLaMA 1's example.py load)
    ("llama generation.py, shards against ranks",
     "AssertionError: Loading a checkpoint for MP=8 but world size is 2",
     "checkpoint.model_parallel_shards"),
    ("llama generation.py, no shard",
     "AssertionError: no checkpoint files found in /models/llama-2-7b",
     "checkpoint.model_parallel_shards"),
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

# Then the families the issue lists, each text as its source prints it, in each release
# that changed it.
PHASE_B = [
    # NCCL src/include/cudawrap.h: a driver-API failure carries its number
    ("nccl cudawrap.h", "h1:11:22 [0] NCCL WARN Cuda failure 2 'out of memory'",
     "cuda.out_of_memory"),
    ("nccl cudawrap.h, after torch's 'Last error:'", "Cuda failure 101 'invalid device ordinal'",
     "device.invalid_ordinal"),
    # NCCL src/graph/paths.cc: NVML reports P2P off between NVLink-connected GPUs
    ("nccl graph/paths.cc",
     "h1:11:22 [0] graph/paths.cc:396 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 "
     "and 0. This should not be the case given their connectivity, and is probably due to a "
     "hardware issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.",
     "cuda.gpu_hardware"),
    # launchers' reports of a rank killed (SIGKILL: the OOM killer) or aborted
    ("torch elastic api.py (torch's newer glog-style format)",
     "E1223 05:18:02.971000 3304089 site-packages/torch/distributed/elastic/multiprocessing/"
     "api.py:882] failed (exitcode: -9) local_rank: 0 (pid: 3304209) of binary: /usr/bin/python3",
     "launch.rank_killed"),
    ("torch elastic api.py (torch's newer glog-style format), SIGABRT",
     "E0612 10:39:45.170000 140147154405568 torch/distributed/elastic/multiprocessing/api.py:826] "
     "failed (exitcode: -6) local_rank: 1 (pid: 4412) of binary: /usr/bin/python",
     "launch.rank_aborted"),
    ("deepspeed launch.py sigkill_handler (logger.error(f'{cmd} exits with ...'))",
     "[2024-05-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', "
     "'-u', 'train.py', '--local_rank=0', '--deepspeed', 'ds.json'] exits with return code = -9",
     "launch.rank_killed"),
    ("python subprocess.CalledProcessError (accelerate's simple_launcher)",
     "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with "
     "<Signals.SIGKILL: 9>.", "launch.rank_killed"),
    ("torch/multiprocessing/spawn.py",
     "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL",
     "launch.rank_killed"),
    ("torch/multiprocessing/spawn.py, SIGBUS",
     "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGBUS",
     "launch.rank_bus_error"),
    ("linux mm/oom_kill.c (dmesg -T)",
     "[Mon May  6 10:00:00 2024] Out of memory: Killed process 12345 (python) total-vm:"
     "123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:200000kB "
     "oom_score_adj:0", "launch.rank_killed"),
    ("linux mm/oom_kill.c (before 5.0)",
     "Out of memory: Kill process 12345 (python) score 912 or sacrifice child",
     "launch.rank_killed"),
    ("linux mm/oom_kill.c, a memory cgroup",
     "Memory cgroup out of memory: Killed process 12345 (python) total-vm:123456kB, "
     "anon-rss:65432kB, file-rss:0kB, shmem-rss:0kB", "launch.rank_killed"),
    ("slurm task/cgroup (22.05+)",
     "slurmstepd: error: Detected 1 oom_kill event in StepId=1234.0. Some of the step tasks have "
     "been OOM Killed.", "launch.rank_killed"),
    ("slurm task/cgroup (older)",
     "slurmstepd: error: Detected 1 oom-kill event(s) in step 1234.batch cgroup. Some of your "
     "processes may have been killed by the cgroup out-of-memory handler.", "launch.rank_killed"),
    ("kubernetes (kubectl describe pod)", "      Reason:       OOMKilled", "launch.rank_killed"),
    # torch ProcessGroupNCCL.cpp's watchdog (2.2+: the sequence numbers; 2.3+: heartbeat)
    ("ProcessGroupNCCL.cpp, Timeout at NCCL work",
     "[rank1]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] "
     "Timeout at NCCL work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.",
     "nccl.watchdog_timeout"),
    ("ProcessGroupNCCL.cpp, the watchdog's heartbeat",
     "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck "
     "for 480 seconds without making progress in monitoring enqueued collectives. This typically "
     "indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and could be "
     "triggered by another thread holding the GIL inside a CUDA api (for example, "
     "CudaEventDestroy), or other deadlock-prone behaviors.", "nccl.watchdog_timeout"),
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: ProcessGroupWrapper.cpp's shape check, and
    # ProcessGroupGloo.cpp's monitoredBarrier (which rank never reached the collective)
    ("ProcessGroupWrapper.cpp (torch 1.10+)",
     "RuntimeError: Error when verifying shape tensors for collective ALLREDUCE on rank 0. This "
     "likely indicates that input shapes into the collective are mismatched across ranks. Got "
     "shapes:  10", "torch.collective_mismatch"),
    ("ProcessGroupGloo.cpp monitoredBarrier",
     "RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 1800000 ms",
     "torch.collective_timeout"),
    ("ProcessGroupGloo.cpp monitoredBarrier(wait_all_ranks=True)",
     "RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 30000 ms",
     "torch.collective_timeout"),
    # aten/src/ATen/MapAllocator.cpp: a tensor shared through /dev/shm (DataLoader workers)
    ("aten MapAllocator.cpp, shm_open",
     "RuntimeError: unable to open shared memory object </torch_2345_1234567890_0> in read-write "
     "mode: No space left on device (28)", "dataloader.shm"),
    ("aten MapAllocator.cpp, mmap",
     "RuntimeError: unable to mmap 1048576 bytes from file </torch_2345_1234567890_0>: No space "
     "left on device (28)", "dataloader.shm"),
    # CUDA runtime/driver: error 804 (a cuda-compat libcuda on a GPU it does not support)
    ("cuda runtime 804", "RuntimeError: CUDA error: forward compatibility was attempted on non "
     "supported HW", "cuda.driver_library_mismatch"),
    ("torch c10/cuda cudaGetDeviceCount warning, 804",
     "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
     "some cuda functions before calling NumCudaDevices() that might have already set an error? "
     "Error 804: forward compatibility was attempted on non supported HW",
     "cuda.driver_library_mismatch"),
    ("cuda driver API 804", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "cuda.driver_library_mismatch"),
    # torch/cuda/__init__.py _warn_unsupported_code (2.13's wording)
    ("torch/cuda/__init__.py (2.13)",
     "Your installed torch==2.13.0+cu130 does not include kernels for this GPU. Reinstall the "
     "same version against a CUDA build that does, e.g.:", "cuda.no_kernel_image"),
    ("torch/cuda/__init__.py (2.13), no build",
     "No published PyTorch CUDA builds for release 2.13.0+cu130 support this GPU. Visit "
     "https://pytorch.org/get-started/locally/ to find a compatible release.",
     "cuda.no_kernel_image"),
    # nvidia-smi (NVML): a GPU gone from the bus
    ("nvidia-smi", "Unable to determine the device handle for GPU 0000:05:00.0: GPU is lost.  "
     "Reboot the system to recover this GPU", "cuda.gpu_hardware"),
]
LINES += PHASE_B

# Phase C (after batch 5 was measured, issue #34): the wordings of batch 5's misses from
# their sources, and the families a next log is likely to hold that no rule read, each as
# its source prints it.
PHASE_C = [
    # gloo/transport/tcp/device.cc lookupAddrForHostname: the host's own name (no
    # GLOO_SOCKET_IFNAME) did not resolve, or resolves to an address this host lacks
    ("gloo tcp/device.cc lookupAddrForHostname",
     "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:138] "
     "rp != nullptr. Unable to find address for: node-7.cluster", "rendezvous.hostname"),
    ("gloo tcp/device.cc lookupAddrForHostname, bind(2)",
     "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:128] "
     "bind_rv == 0. Unable to find address for node-7; bind(2) for 10.0.0.7 failed with: Cannot "
     "assign requested address", "rendezvous.hostname"),
    # torch ProcessGroupGloo.cpp createDefaultDevice's TORCH_WARN_ONCE, then gloo's
    # tcp/helpers.h connect failure to the loopback address the peer advertised
    ("ProcessGroupGloo.cpp loopback fallback, then gloo helpers.h",
     "[rank1]:[W427 03:10:15.652192062 ProcessGroupGloo.cpp:715] Warning: Unable to resolve "
     "hostname to a (local) address. Using the loopback address as fallback. Manually set the "
     "network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())\n"
     "[rank1]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with [../third_party/gloo/"
     "gloo/transport/tcp/pair.cc:144] timed out connecting: SO_ERROR: Connection refused, "
     "remote=[127.0.0.1]:14215", "rendezvous.hostname"),
    ("gloo tcp/helpers.h (through torch's connectFullMesh)",
     "[rank0]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with [../third_party/gloo/"
     "gloo/transport/tcp/pair.cc:144] timed out connecting: SO_ERROR: No route to host, "
     "remote=[10.0.0.2]:2485", "network.peer_connect"),
    # a launcher's rank argument the script does not accept (torch.distributed.launch passes
    # --local-rank since 2.0, DeepSpeed's launcher --local_rank)
    ("python argparse", "train.py: error: unrecognized arguments: --local-rank=1",
     "launch.local_rank_argument"),
    ("transformers hf_argparser.py",
     "ValueError: Some specified arguments are not used by the HfArgumentParser: "
     "['--local-rank=0']", "launch.local_rank_argument"),
    # torch/distributed/rendezvous.py _env_rendezvous_handler: no launcher set the variables
    ("torch rendezvous.py env://",
     "ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
     "variable RANK expected, but not set", "launch.no_launcher_env"),
    ("a script reading torchrun's variables", "KeyError: 'LOCAL_RANK'", "launch.no_launcher_env"),
    # a torch without (part of) distributed: torch 0.4, distributed_c10d.py, __init__.py
    # without is_available(), TCPStore.cpp on Windows (2.4+)
    ("torch 0.4 distributed/__init__.py",
     "RuntimeError: PyTorch built without distributed support", "torch.distributed_unavailable"),
    ("distributed_c10d.py", "RuntimeError: Distributed package doesn't have NCCL built in",
     "torch.distributed_unavailable"),
    ("torch/distributed/__init__.py, is_available() False",
     "AttributeError: module 'torch.distributed' has no attribute 'init_process_group'",
     "torch.distributed_unavailable"),
    ("TCPStore.cpp (Windows, 2.4+)",
     "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
     "torch.distributed_unavailable"),
    ("torch/cuda/__init__.py _lazy_init", "AssertionError: Torch not compiled with CUDA enabled",
     "torch.cpu_build"),
    # NCCL src/graph/search.cc and xml.cc: a topology or graph file of another machine
    ("nccl graph/search.cc",
     "h1:16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.",
     "nccl.topology_file"),
    ("nccl graph/xml.cc", "h1:1:2 [0] graph/xml.cc:394 NCCL WARN XML Topology has wrong version "
     "2, 1 needed", "nccl.topology_file"),
    ("nccl graph/xml.cc, graph file",
     "h1:1:2 [0] graph/xml.cc:1257 NCCL WARN Could not open XML graph file /opt/graph.xml : No "
     "such file or directory", "nccl.topology_file"),
    # NCCL src/bootstrap.cc and misc/socket.cc: the bootstrap's unexpected connections
    ("nccl bootstrap.cc (to 2.18)",
     "h1:1:2 [0] bootstrap.cc:126 NCCL WARN Bootstrap Root : mismatch in rank count from procs "
     "8 : 16", "nccl.bootstrap_connection"),
    ("nccl bootstrap.cc (2.19+)",
     "h1:1:2 [0] bootstrap.cc:335 NCCL WARN Bootstrap Root : mismatch in info from procs, nranks "
     "8 vs 16, nroots 1 vs 1, iroot 0 vs 0, offset 0 vs 0", "nccl.bootstrap_connection"),
    ("nccl socket.cc closed in accept, bootstrap.cc's trace",
     "h1:1:2 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer "
     "10.10.1.3<36138>\nh1:1:2 [0] NCCL INFO misc/socket.cc:80 -> 6\n"
     "h1:1:2 [0] NCCL INFO bootstrap.cc:701 -> 6\nh1:1:2 [0] NCCL INFO init.cc:1402 -> 6",
     "nccl.bootstrap_connection"),
    ("nccl socket.cc wrong magic, then NCCL's remote error",
     "h1:1:2 [0] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic 474554202f20 != "
     "3c9b8fe7a2dd16ae\n[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/"
     "csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a network "
     "error, NCCL version 2.21.5", "nccl.bootstrap_connection"),
    # NCCL init.cc ncclGetErrorString and torch's getNcclErrorDetailStr: invalid usage
    ("torch NCCLUtils.hpp, invalid usage",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
     "NCCLUtils.hpp:317, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version "
     "2.20.5", "nccl.invalid_usage"),
    ("torch getNcclErrorDetailStr, invalid usage",
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
     "nccl.invalid_usage"),
    # torch/csrc/distributed/c10d/Utils.hpp recvBytes and TCPStore.cpp: the store's host
    # went away (a consequence)
    ("c10d Utils.hpp recvBytes (2.4+)",
     "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely "
     "closed. Did the remote server shutdown or crash?", "torch.peer_closed"),
    ("c10d TCPStore.cpp recvValue",
     "[W1122 11:47:45.949247853 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=77, "
     "addr=[::ffff:127.0.0.1]:39732, remote=[::ffff:127.0.0.1]:29600): failed to recv, got 0 "
     "bytes", "torch.peer_closed"),
    # a full disk under a checkpoint: torch.save's zip writer (inline_container.cc), errno
    ("caffe2/serialize/inline_container.cc",
     "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 1728 vs 1616",
     "checkpoint.disk_full"),
    ("caffe2/serialize/inline_container.cc, write",
     "RuntimeError: PytorchStreamWriter failed writing file data/3: file write failed",
     "checkpoint.disk_full"),
    ("OSError ENOSPC", "OSError: [Errno 28] No space left on device: '/ckpt/step_100/model."
     "safetensors'", "checkpoint.disk_full"),
    ("OSError EDQUOT", "OSError: [Errno 122] Disk quota exceeded", "checkpoint.disk_full"),
    # the open-file limit: torch/utils/data/dataloader.py, multiprocessing/reduction.py
    ("torch/utils/data/dataloader.py",
     "RuntimeError: Too many open files. Communication with the workers is no longer possible. "
     "Please increase the limit using `ulimit -n` in the shell or change the sharing strategy by "
     "calling `torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of "
     "your code", "host.open_files"),
    ("python multiprocessing/reduction.py recvfds", "RuntimeError: received 0 items of ancdata",
     "host.open_files"),
    ("OSError EMFILE", "OSError: [Errno 24] Too many open files: '/data/shard-0001.bin'",
     "host.open_files"),
    # no GPU in this process: torch's, CUDA's and ProcessGroupNCCL's wordings
    ("torch/cuda/__init__.py", "RuntimeError: No CUDA GPUs are available", "device.no_gpu"),
    ("ProcessGroupNCCL.cpp",
     "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", "device.no_gpu"),
    ("torch/cuda/__init__.py _check_driver",
     "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
     "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
     "device.no_gpu"),
    ("cuda runtime cudaErrorNoDevice",
     "RuntimeError: CUDA error: no CUDA-capable device is detected", "device.no_gpu"),
    # CUDA's peer access error (error 217), from torch and inside NCCL
    ("cuda runtime 217",
     "RuntimeError: CUDA error: peer access is not supported between these two devices",
     "cuda.p2p_unsupported"),
    ("nccl checks.h, 217",
     "h1:1:2 [0] NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
     "cuda.p2p_unsupported"),
    # torch 0.4's DDP kept local closures: pickle's own wording
    ("torch 0.4 nn/parallel/distributed.py under pickle",
     "AttributeError: Can't pickle local object 'DistributedDataParallel._register_nccl_grad_hook."
     "<locals>.allreduce_hook'", "torch.pickle_process_group"),
]
LINES += PHASE_C

# Phase D of issue #34 (after batch 6 was measured): the OOM killer in each launcher's and
# scheduler's wording, NCCL's connect failures of its newer releases, MPI launchers that
# are not the job's MPI; each as its source prints it
PHASE_D = [
    # deepspeed/launcher/launch.py sigkill_handler, logger.error(f"{cmd} exits with return
    # code = {last_return_code}"), where a pasted log broke the command list
    ("deepspeed launch.py sigkill_handler, wrapped",
     "'--log_path', './ckpt/train_mvtec/log_rest/'] exits with return code = -9",
     "launch.rank_killed"),
    # torch elastic's ChildFailedError summary (errors/__init__.py: 'exitcode  : N (pid: P)')
    ("torch elastic ChildFailedError summary",
     "  exitcode  : -9 (pid: 3908423)", "launch.rank_killed"),
    # Slurm: srun's task state, slurmstepd's cgroup OOM count, seff's job state
    ("slurm srun task state", "srun: error: nid002715: task 85: Out Of Memory",
     "launch.rank_killed"),
    ("slurm slurmstepd cgroup",
     "slurmstepd-phoenix-07: error: Detected 2 oom-kill event(s) in StepId=1683797.batch. "
     "Some of your processes may have been killed by the cgroup out-of-memory handler.",
     "launch.rank_killed"),
    ("slurm seff", "State: OUT_OF_MEMORY (exit code 0)", "launch.rank_killed"),
    # kubectl describe pod: the container's Last State
    ("kubectl describe pod", "      Exit Code:    137", "launch.rank_killed"),
    # bash's job status for a child killed by SIGKILL (a Slurm batch script here)
    ("bash job status",
     "/var/spool/job22207649/slurm_script: line 22: 443552 Killed                  python "
     "main.py LCO_test.ini", "launch.rank_killed"),
    ("bash, foreground", "Killed", "launch.rank_killed"),
    # NCCL src/misc/socket.cc (2.12-2.22) and src/os/linux.cc (2.30)
    ("nccl socket.cc socketPollConnect",
     "h1:1:2 [0] NCCL WARN socketPollConnect poll() failed with error Connection timed out",
     "network.peer_connect"),
    ("nccl os/linux.cc ncclOsSocketPollConnect",
     "h1:1:2 [0] NCCL WARN ncclOsSocketPollConnect to 10.0.0.2<35001> failed with error "
     "No route to host", "network.peer_connect"),
    ("nccl os/linux.cc connect failed",
     "h1:1:2 [0] NCCL WARN bootstrapConnect: connect to 10.0.0.2<35001> failed : "
     "Connection refused", "network.peer_connect"),
    # NCCL's INFO lines alone: a guess, said as one
    ("nccl socket.cc INFO, retrying",
     "h1:1:2 [0] NCCL INFO Call to connect returned Connection refused, retrying",
     "network.peer_connect"),
    ("nccl os/linux.cc INFO, retrying",
     "h1:1:2 [0] NCCL INFO bootstrapConnect: connect to 10.0.0.2<35001> returned Connection "
     "refused, retrying (1000/34000) after sleep for 100 msec", "network.peer_connect"),
    ("nccl 2.17 socket.cc trace", "h1:1:2 [0] NCCL INFO misc/socket.cc:567 -> 2",
     "network.peer_connect"),
    # MPICH's Hydra (ui/mpich/utils.c, utils/args/args.c), Open MPI's PMI help text
    ("mpich hydra ui/mpich/utils.c",
     "[mpiexec@r001] HYD_uii_mpx_get_parameters (ui/mpich/utils.c:1648): unable to parse "
     "user arguments", "launch.mpi_mismatch"),
    ("mpich hydra utils/args/args.c",
     "[mpiexec@r001] HYDU_parse_array (utils/args/args.c:174): argument matching returned "
     "error", "launch.mpi_mismatch"),
    ("open mpi under srun",
     "but OMPI was not built with SLURM's PMI support and therefore cannot",
     "launch.mpi_mismatch"),
    ("open mpi under srun, PMI2",
     "PMI2_Init failed to intialize.  Return code: 14", "launch.mpi_mismatch"),
    # NCCL's single-host hang: its init lines, then nothing (2.4's init.cc)
    ("nccl 2.4 init.cc", "h1:15833:15833 [1] NCCL INFO Setting affinity for GPU 1 to ff00ff",
     "nccl.p2p_hang"),
]
LINES += PHASE_D

# Phase E of issue #34 (after batch 7 was measured): what torch, CUDA, NCCL and the
# schedulers print for the causes the batches missed most, each as its source prints it
PHASE_E = [
    # torch/distributed/distributed_c10d.py (1.x-2.x): the message is two string literals,
    # and a traceback shows this line of torch's own frame
    ("distributed_c10d.py raise line, as a traceback shows it",
     '    raise RuntimeError("Distributed package doesn\'t have NCCL " "built in")',
     "torch.distributed_unavailable"),
    ("distributed_c10d.py raise line (torch 1.0, the literal broken over two lines)",
     '    raise RuntimeError("Distributed package doesn\'t have NCCL "',
     "torch.distributed_unavailable"),
    ("distributed_c10d.py, backend='mpi'",
     "RuntimeError: Distributed package doesn't have MPI built in. MPI is only included if "
     "you build PyTorch from source on a host that has MPI installed.",
     "torch.distributed_unavailable"),
    ("distributed_c10d.py, backend='ucc'",
     "RuntimeError: Distributed package doesn't have UCC built in",
     "torch.distributed_unavailable"),
    # CUDA runtime errors (cudaGetErrorString) that name the environment, as torch's
    # c10/cuda/CUDAException.cpp ('CUDA error: ...') and NCCL's include/checks.h ('Cuda
    # failure N 'STRING'') print them
    ("cuda 802 cudaErrorSystemNotReady, torch", "RuntimeError: CUDA error: system not yet "
     "initialized", "cuda.fabric_manager"),
    ("cuda 802, nccl checks.h", "h1:1:2 [0] NCCL WARN Cuda failure 802 'system not yet "
     "initialized'", "cuda.fabric_manager"),
    ("cuda 98 cudaErrorInvalidDeviceFunction, nccl checks.h",
     "h1:1:2 [0] enqueue.cc:122 NCCL WARN Cuda failure 'invalid device function'",
     "cuda.no_kernel_image"),
    ("cuda 98, torch", "RuntimeError: CUDA error: invalid device function",
     "cuda.no_kernel_image"),
    ("cuda 222 cudaErrorUnsupportedPtxVersion, nccl checks.h",
     "h1:1:2 [0] NCCL WARN Cuda failure 222 'the provided PTX was compiled with an "
     "unsupported toolchain.'", "cuda.driver_too_old"),
    ("cuda 36 cudaErrorCallRequiresNewerDriver, torch",
     "RuntimeError: CUDA error: API call is not supported in the installed CUDA driver",
     "cuda.driver_too_old"),
    ("cuda 34 cudaErrorStubLibrary, torch", "RuntimeError: CUDA error: CUDA driver is a stub "
     "library", "device.no_gpu"),
    ("cuda 46 cudaErrorDevicesUnavailable, torch (CUDA 11+)",
     "torch.AcceleratorError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
     "device.gpu_busy"),
    ("cuda 46, torch 0.x THCudaCheck",
     "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=51 error=46 : all "
     "CUDA-capable devices are busy or unavailable", "device.gpu_busy"),
    # NCCL src/net.cc ncclNetInit: NCCL_NET names a network no loaded plugin has
    ("nccl net.cc ncclNetInit", "h1:1:2 [0] net.cc:626 NCCL WARN Error: network IB not found.",
     "nccl.net_not_found"),
    # Slurm slurmstepd req.c (JOB and STEP, with and without 'ON HOST') and srun's plugin
    ("slurm slurmstepd req.c", "slurmstepd: error: *** JOB 123456 ON gpu-node-07 CANCELLED AT "
     "2025-01-02T03:04:05 DUE TO TIME LIMIT ***", "launch.time_limit"),
    ("slurm slurmstepd, older", "slurmstepd: error: *** STEP 123456.0 CANCELLED AT "
     "2019-01-02T03:04:05 DUE TO TIME LIMIT ***", "launch.time_limit"),
    ("slurm srun", "srun: error: *** STEP 123456.0 CANCELLED AT 2025-01-02T03:04:05 DUE TO "
     "TIME LIMIT ***", "launch.time_limit"),
    ("slurm slurmstepd req.c, preemption", "slurmstepd: error: *** STEP 123456.0 ON gpu-node-07 "
     "CANCELLED AT 2025-01-02T03:04:05 DUE TO PREEMPTION ***", "launch.preempted"),
    # Lightning accelerators/cuda.py (2.x): Trainer(devices=N) names GPUs this process
    # cannot see
    ("lightning accelerators/cuda.py",
     "lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: "
     "[0, 1, 2, 3]", "device.invalid_ordinal"),
]
LINES += PHASE_E

# Phase F of issue #34 (after batches 8 and 9 were measured): the texts of the causes no
# signature named, each as its source prints it
PHASE_F = [
    # NCCL src/include/shm.h (2.4-2.11): shm_open through SYSCHECKVAL ('Call to shm_open
    # failed : %s'); src/misc/shmutils.cc (2.23-2.29) and src/os/linux.cc (2.30): mkstemp's
    # failure and the segment's, with errno (EACCES, EROFS)
    ("nccl include/shm.h (2.4-2.11)",
     "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission "
     "denied", "nccl.shm_permission"),
    ("nccl misc/shmutils.cc (2.23-2.29), mkstemp",
     "h1:1:2 [0] misc/shmutils.cc:73 NCCL WARN Error: failed to create shared memory file "
     "/dev/shm/nccl-XXXXXX, error Permission denied (13)", "nccl.shm_permission"),
    ("nccl os/linux.cc (2.30), the segment",
     "h1:1:2 [0] os/linux.cc:842 NCCL WARN Error while creating shared memory segment "
     "/dev/shm/nccl-Ab12Cd (size 9637888), error: Permission denied (13)", "nccl.shm_permission"),
    ("nccl misc/shmutils.cc (2.23-2.29), a read-only /dev/shm",
     "h1:1:2 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment "
     "/dev/shm/nccl-Ab12Cd (size 9637888), error: Read-only file system (30)",
     "nccl.shm_permission"),
    # NCCL src/transport/nvls.cc (2.27-2.30): cuMulticastBindMem failed (its WARN breaks
    # the message over three lines; torch repeats it after 'Last error:')
    ("nccl transport/nvls.cc (2.29+)",
     "h1:1:2 [0] transport/nvls.cc:284 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast "
     "memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the "
     "present state'.", "nccl.nvls_multicast"),
    ("nccl transport/nvls.cc, after torch's 'Last error:'",
     "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 4194304 : CUDA error 800 "
     "'operation not permitted'.", "nccl.nvls_multicast"),
    # torch/csrc/distributed/c10d/reducer.cpp, each release's wording
    ("torch reducer.cpp checkAndRaiseMarkedTwiceError",
     "[rank1]: RuntimeError: Expected to mark a variable ready only once. This error is caused "
     "by one of the following reasons: 1) Use of a module parameter outside the `forward` "
     "function. Please make sure model parameters are not shared across multiple concurrent "
     "forward-backward passes. or try to use _set_static_graph() as a workaround if this "
     "module graph does not change during training loop.2) Reused parameters in multiple "
     "reentrant backward passes. For example, if you use multiple `checkpoint` functions to "
     "wrap the same part of your model, it would result in the same set of parameters been "
     "used by different reentrant backward passes multiple times, and hence marking a "
     "variable ready multiple times. DDP does not support such use cases in default. You can "
     "try to use _set_static_graph() as a workaround if your module graph does not change "
     "over iterations.", "torch.ddp_reentrant_checkpoint"),
    ("torch reducer.cpp, earlier ('... DDP does not support such use cases yet.')",
     "RuntimeError: Expected to mark a variable ready only once. This error is caused by one "
     "of the following reasons: 1) Use of a module parameter outside the `forward` function. "
     "Please make sure model parameters are not shared across multiple concurrent "
     "forward-backward passes2) Reused parameters in multiple reentrant backward passes. For "
     "example, if you use multiple `checkpoint` functions to wrap the same part of your "
     "model, it would result in the same set of parameters been used by different reentrant "
     "backward passes multiple times, and hence marking a variable ready multiple times. DDP "
     "does not support such use cases yet.3) Incorrect unused parameter detection.",
     "torch.ddp_reentrant_checkpoint"),
    ("torch reducer.cpp, the first",
     "RuntimeError: Expected to mark a variable ready only once. This error is caused by use "
     "of a module parameter outside the `forward` function. The return value of the "
     "`forward` function is inspected by the distributed data parallel wrapper to figure out "
     "if any of the module's parameters went unused.", "torch.ddp_reentrant_checkpoint"),
    # lightning/fabric/plugins/environments/mpi.py (2.1.0-2.1.2), as a traceback shows it
    ("lightning mpi.py _init_comm_local, a traceback's source line",
     "    unique_hosts = sorted(set(all_hostnames))", "launch.lightning_mpi_environment"),
    # torch/distributed/elastic/rendezvous/utils.py parse_rendezvous_endpoint; accelerate's
    # simple launcher (utils/launch.py)
    ("torch elastic rendezvous/utils.py, the port",
     "ValueError: The port number of the rendezvous endpoint 'None:None' must be an integer "
     "between 0 and 65536.", "launch.rendezvous_endpoint"),
    ("torch elastic rendezvous/utils.py, the host",
     "ValueError: The hostname of the rendezvous endpoint 'node_1@a:29500' must be a "
     "dot-separated list of labels, an IPv4 address, or an IPv6 address.",
     "launch.rendezvous_endpoint"),
    ("accelerate utils/launch.py prepare_simple_launcher_cmd_env",
     "AssertionError: When using multiple machines, you need to specify the main process IP.",
     "launch.rendezvous_endpoint"),
    # Python's os.environ in a traceback's source line, the exception line not in the log
    ("a traceback's source line, os.environ['LOCAL_RANK']",
     '    th.cuda.set_device(int(os.environ["LOCAL_RANK"]))', "launch.no_launcher_env"),
    ("a traceback's source line, os.environ['RANK']",
     "    rank = int(os.environ['RANK'])", "launch.no_launcher_env"),
    ("a traceback's source line, os.environ['WORLD_SIZE']",
     '    world_size = int(os.environ["WORLD_SIZE"])', "launch.no_launcher_env"),
]
LINES += PHASE_F

# Phase G of issue #34 (after batch 10 was measured): a rank's death by SIGBUS as each of
# its crash handlers and its parent print it; NCCL's frames in a handler's report (its
# shared memory in /dev/shm); torch's release-bound refusals in torch.distributed; the
# launcher's rank argument refused by the other parsers
UCX_NCCL = ("[node1:21707:0:21763] Caught signal 7 (Bus error: nonexistent physical address)\n"
            "==== backtrace (tid:  21763) ====\n"
            " 0 0x0000000000043090 killpg()  ???:0\n"
            " 1 0x000000000007587d ncclGroupEnd()  ???:0\n"
            " 2 0x0000000000008609 start_thread()  ???:0\n"
            "=================================")
PHASE_G = [
    # UCX src/ucs/debug/debug.c: 'Caught signal %d (%s: %s%s)' (strsignal, the si_code's
    # cause), no backtrace below it
    ("ucx debug.c ucs_debug_handle_error_signal",
     "[node1:21707:0:21763] Caught signal 7 (Bus error: nonexistent physical address)",
     "launch.rank_bus_error"),
    # Open MPI opal/util/stacktrace.c: HOSTFORMAT "Signal: %s (%d)"
    ("open mpi opal/util/stacktrace.c", "[node1:21707] Signal: Bus error (7)",
     "launch.rank_bus_error"),
    # CPython Modules/faulthandler.c: "Fatal Python error: " and the handler's name
    ("cpython faulthandler.c", "Fatal Python error: Bus error", "launch.rank_bus_error"),
    # abseil absl/debugging/failure_signal_handler.cc (Ray's workers print it)
    ("abseil failure_signal_handler.cc",
     "*** SIGBUS received at time=1700000000 on cpu 3 ***", "launch.rank_bus_error"),
    # glog src/signalhandler.cc DumpSignalInfo
    ("glog signalhandler.cc",
     "*** SIGBUS (@0x7f3a2c000000) received by PID 21707 (TID 0x7f3a1b7fe700) from PID 0; "
     "stack trace: ***", "launch.rank_bus_error"),
    # gdb, as a job run under it stops
    ("gdb", 'Thread 787 "python" received signal SIGBUS, Bus error.', "launch.rank_bus_error"),
    # bash's job status (strsignal(SIGBUS), with WCOREDUMP), in a script and at a prompt
    ("bash jobs.c, a script",
     "train.sh: line 12: 21707 Bus error               (core dumped) python train.py",
     "launch.rank_bus_error"),
    ("bash jobs.c, a prompt", "Bus error (core dumped)", "launch.rank_bus_error"),
    # Slurm's srun (strsignal of the task's signal)
    ("slurm srun", "srun: error: node1: task 3: Bus error", "launch.rank_bus_error"),
    # Open MPI's mpirun (help-errmgr-base.txt) and MPICH's Hydra (its exit string)
    ("open mpi mpirun",
     "mpirun noticed that process rank 3 with PID 21707 on node node1 exited on signal 7 "
     "(Bus error).", "launch.rank_bus_error"),
    ("mpich hydra", "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Bus error (signal 7)",
     "launch.rank_bus_error"),
    # DeepSpeed deepspeed/launcher/launch.py sigkill_handler, as for -9
    ("deepspeed launch.py sigkill_handler, -7",
     "[2023-07-20 15:45:13,982] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', "
     "'-u', 'main.py', '--local_rank=1'] exits with return code = -7", "launch.rank_bus_error"),
    # kubectl describe pod: the container's last state, 128 + SIGBUS
    ("kubectl describe pod", "      Exit Code:    135", "launch.rank_bus_error"),
    # the same handlers' reports with NCCL's frames below them (its shared memory in
    # /dev/shm: NCCL 2.12-2.18 touch a segment ftruncate did not back)
    ("ucx debug.c with NCCL's frames (detailed)", UCX_NCCL, "nccl.shm_full"),
    ("ucx debug.c with NCCL's frames (backtrace_symbols)",
     "[node1:21707:0:21763] Caught signal 7 (Bus error: nonexistent physical address)\n"
     "==== backtrace (tid:  21763) ====\n"
     " 0  /usr/lib/x86_64-linux-gnu/libnccl.so.2(+0x5d41e) [0x7f3a2f85d41e]\n"
     " 1  /lib/x86_64-linux-gnu/libpthread.so.0(+0x8609) [0x7f3a6c2e9609]\n"
     "=================================", "nccl.shm_full"),
    ("open mpi stacktrace.c with NCCL's frames",
     "[node1:21707] *** Process received signal ***\n"
     "[node1:21707] Signal: Bus error (7)\n"
     "[node1:21707] Signal code: Non-existant physical address (2)\n"
     "[node1:21707] [ 0] /lib/x86_64-linux-gnu/libpthread.so.0(+0x12980)[0x7f3a6c2f3980]\n"
     "[node1:21707] [ 1] /usr/lib/x86_64-linux-gnu/libnccl.so.2(_Z11ncclShmOpenPciPPvS1_i+0x1d3)"
     "[0x7f3a2f85d41e]\n"
     "[node1:21707] *** End of error message ***", "nccl.shm_full"),
    ("abseil failure_signal_handler.cc with NCCL's frames",
     "*** SIGBUS received at time=1700000000 on cpu 3 ***\n"
     "PC: @     0x7f3a2f85d41e  (unknown)  ncclShmOpen()\n"
     "    @     0x7f3a2f85b6d7        144  ncclProxyService()", "nccl.shm_full"),
    ("gdb with NCCL's frame",
     'Thread 787 "python" received signal SIGBUS, Bus error.\n'
     "[Switching to Thread 0x7f45d7dff640 (LWP 3925)]\n"
     "0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) () "
     "from /usr/lib/x86_64-linux-gnu/libnccl.so.2", "nccl.shm_full"),
    ("cpython 3.14 faulthandler, its C stack",
     "Fatal Python error: Bus error\n\n"
     "Current thread's C stack trace (most recent call first):\n"
     '  Binary file "/usr/lib/x86_64-linux-gnu/libnccl.so.2", at +0x5d41e [0x7f3a2f85d41e]\n'
     '  Binary file "/lib/x86_64-linux-gnu/libc.so.6", at +0x94ac3 [0x7f3a6c294ac3]',
     "nccl.shm_full"),
    # torch's refusals of one span of releases, lifted by a later one
    ("torch 2.4 _composable/fsdp (#129519), FSDP2 with TP",
     "NotImplementedError: 2D state_dict is under development. Please check "
     "https://github.com/pytorch/pytorch/issues/129627 for more details.",
     "torch.release_lacks_feature"),
    ("torch <= 1.10 ProcessGroupNCCL.cpp gather",
     "RuntimeError: ProcessGroupNCCL does not support gather", "torch.release_lacks_feature"),
    ("torch <= 1.10 ProcessGroupNCCL.cpp scatter",
     "RuntimeError: ProcessGroupNCCL does not support scatter", "torch.release_lacks_feature"),
    ("torch ProcessGroupNCCL.cpp built with NCCL < 2.7",
     "RuntimeError: ProcessGroupNCCL only supports alltoall* for NCCL lib version >= 2.7.0",
     "torch.release_lacks_feature"),
    ("torch ProcessGroupNCCL.cpp built with NCCL < 2.7, send",
     "RuntimeError: ProcessGroupNCCL only supports send for NCCL lib version >= 2.7.0",
     "torch.release_lacks_feature"),
    # the launcher's --local-rank / --local_rank refused by the other parsers
    ("jsonargparse (LightningCLI) parse_args",
     "train.py: error: Unrecognized arguments: --local-rank=0", "launch.local_rank_argument"),
    ("click 8 NoSuchOption",
     "Error: No such option: --local-rank Did you mean --local_rank?",
     "launch.local_rank_argument"),
    ("click 7 NoSuchOption", "Error: no such option: --local_rank",
     "launch.local_rank_argument"),
    ("google fire core.py", "ERROR: Could not consume arg: --local_rank=0",
     "launch.local_rank_argument"),
    ("absl app.py parse_flags_with_usage",
     "FATAL Flags parsing error: Unknown command line flag 'local_rank'",
     "launch.local_rank_argument"),
    ("hyperpyyaml core.py recursive_update (SpeechBrain)",
     "KeyError: \"Override 'local_rank' not found in: ['seed', 'output_folder', 'lr']\"",
     "launch.local_rank_argument"),
    ("hydra config_loader_impl.py", "Could not override 'local_rank'.",
     "launch.local_rank_argument"),
    ("omegaconf from_cli merged into a struct config",
     "omegaconf.errors.ConfigKeyError: Key '--local_rank' is not in struct",
     "launch.local_rank_argument"),
]
LINES += PHASE_G

# Phase H of issue #34 (after batch 11 was measured): DDP's lists of the parameters that
# got no gradient, FSDP's refusal to offload an unsharded model, torchrun's refusal of its
# own options in a spelling or of a release it does not know, and torch's C++ errors read
# with their place in torch's source (the program's error, not the environment)
PHASE_H = [
    # torch/csrc/distributed/c10d/reducer.cpp ensure_prior_reduction_finished: the lines
    # below 'Expected to have finished reduction ...', each on a line of its own (torch
    # 1.10 on; the names with TORCH_DISTRIBUTED_DEBUG=INFO or DETAIL)
    ("torch reducer.cpp, TORCH_DISTRIBUTED_DEBUG=DETAIL: the names",
     "[rank0]: Parameters which did not receive grad for rank 0: lin2.weight, lin2.bias",
     "torch.ddp_unused_parameters"),
    ("torch reducer.cpp, the indices",
     "[rank1]: Parameter indices which did not receive grad for rank 1: 6 7",
     "torch.ddp_unused_parameters"),
    # torch/distributed/fsdp/_unshard_param_utils.py _validate_unshard_params_args (2.0 on)
    ("torch fsdp _unshard_param_utils.py",
     "NotImplementedError: offload_to_cpu=True and NO_SHARD is not supported yet",
     "torch.fsdp_no_shard_offload"),
    ("torch fsdp _unshard_param_utils.py, a rank's line",
     "[rank0]: NotImplementedError: offload_to_cpu=True and NO_SHARD is not supported yet",
     "torch.fsdp_no_shard_offload"),
    # Python's argparse error() ('PROG: error: unrecognized arguments: ARGS') of
    # torch/distributed/run.py's parser, for options its release does not know
    ("torch 1.10-1.13 torchrun, a hyphenated spelling (2.0)",
     "torchrun: error: unrecognized arguments: --nproc-per-node=8",
     "launch.torchrun_option_unknown"),
    ("torch 1.10-1.13 torchrun, a hyphenated spelling with its value after a space "
     "(argparse refuses the name alone)",
     "torchrun: error: unrecognized arguments: --nproc-per-node",
     "launch.torchrun_option_unknown"),
    ("torch 1.9 python -m torch.distributed.run, hyphenated spellings (2.0)",
     "run.py: error: unrecognized arguments: --rdzv-backend=c10d --rdzv-endpoint=node1:29400",
     "launch.torchrun_option_unknown"),
    ("torch 1.9-1.13 torchrun, --local_addr (2.0)",
     "torchrun: error: unrecognized arguments: --local_addr=10.0.0.1",
     "launch.torchrun_option_unknown"),
    ("torch < 2.3 torchrun, --local-ranks-filter (2.3)",
     "torchrun: error: unrecognized arguments: --local-ranks-filter=0",
     "launch.torchrun_option_unknown"),
    ("torch < 2.3 torchrun, --logs-specs (2.3)",
     "torchrun: error: unrecognized arguments: --logs-specs=my_specs",
     "launch.torchrun_option_unknown"),
    ("torch < 2.10 torchrun, --virtual-local-rank (2.10)",
     "torchrun: error: unrecognized arguments: --virtual-local-rank",
     "launch.torchrun_option_unknown"),
    ("torch < 2.9 under Python 3.14 (prog 'python -m MODULE'), --numa-binding (2.9)",
     "python3.14 -m torch.distributed.run: error: unrecognized arguments: --numa-binding=node",
     "launch.torchrun_option_unknown"),
    ("torch 1.10+ torchrun, torch.distributed.launch's --use_env",
     "torchrun: error: unrecognized arguments: --use_env",
     "launch.torchrun_option_unknown"),
    ("torch <= 1.8 torch.distributed.launch's own parser, torchrun's --standalone (1.9)",
     "launch.py: error: unrecognized arguments: --standalone",
     "launch.torchrun_option_unknown"),
    ("torch 1.9-1.13 torch.distributed.launch, --use-env (2.0)",
     "launch.py: error: unrecognized arguments: --use-env",
     "launch.torchrun_option_unknown"),
    # c10/util/Exception.cpp and c10's assertion macros: a C++ error's place in torch's
    # source on the message's line (the path names c10d, not a part of the environment)
    ("torch <= 1.4 AT_ASSERTM in reducer.cpp, then the C++ backtrace (c10/util/Backtrace.cpp)",
     "RuntimeError: replicas_[0].size() >= 1 ASSERT FAILED at /pytorch/torch/csrc/distributed/"
     "c10d/reducer.cpp:53, please report a bug to PyTorch. Expected at least one parameter. "
     "(Reducer at /pytorch/torch/csrc/distributed/c10d/reducer.cpp:53)\n"
     "frame #0: std::function<std::string ()>::operator()() const + 0x11 (0x7f1e388cc441 in "
     "/usr/lib/python3.6/site-packages/torch/lib/libc10.so)", "program.exception"),
    ("torch 1.5+ TORCH_INTERNAL_ASSERT in reducer.cpp",
     "RuntimeError: !unmarked_param_indices.empty() INTERNAL ASSERT FAILED at "
     "\"../torch/csrc/distributed/c10d/reducer.cpp\":1531, please report a bug to PyTorch. ",
     "program.exception"),
    ("torch 1.5-1.6 TORCH_CHECK in reducer.cpp's Reducer::Reducer, c10::Error's "
     "' (FUNC at FILE:LINE)'",
     "RuntimeError: Expected at least one parameter. (Reducer at /pytorch/torch/csrc/"
     "distributed/c10d/reducer.cpp:54)\n"
     "frame #0: c10::Error::Error(c10::SourceLocation, std::string const&) + 0x4e "
     "(0x7f2b1c4d2e4e in /opt/conda/lib/python3.7/site-packages/torch/lib/libc10.so)",
     "program.exception"),
]
LINES += PHASE_H

# Phase I (after batch 12 was measured): the NCCL watchdog's timeouts of two ranks read
# together (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp's WorkNCCL operator<<, in
# the libtorch of 1.13.1: '[Rank N] Watchdog caught collective operation timeout:
# WorkNCCL(SeqNum=N, OpType=OP, TensorShape=[...], Timeout(ms)=T) ran for M milliseconds
# before timing out.', and of 2.14.1: '[PG ID N PG GUID G(DESC) Rank N] ...
# WorkNCCL(SeqNum=N, OpType=OP, NumelIn=I, NumelOut=O, Timeout(ms)=T) ...'); SeqNum is
# the group's count of the collectives the rank issued (ProcessGroupNCCL.hpp: seq_,
# seqCollective_), so two ranks timed out at different numbers, or at one number on
# different operations, issued different collectives. FSDP's refusal of a partly frozen
# unit (flat_param.py in 1.13.1, _flat_param.py in 2.13.0 and 2.14.1).
W113 = ("[E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum={n}, OpType={op}, TensorShape=[{shape}], Timeout(ms)=1800000) ran for "
        "180{r}012 milliseconds before timing out.\n")
W214 = ("[rank{r}]:[E1104 10:00:0{r}.000000000 ProcessGroupNCCL.cpp:632] [PG ID {pg} PG GUID "
        "{pg}({desc}) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, "
        "OpType={op}, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 60{r}125 "
        "milliseconds before timing out.\n")
PHASE_I = [
    ("torch 1.13 ProcessGroupNCCL.cpp watchdog, two ranks at different SeqNum",
     W113.format(r=0, n=120, op="ALLREDUCE", shape="4096")
     + W113.format(r=1, n=121, op="ALLREDUCE", shape="4096"),
     "torch.collective_mismatch"),
    ("torch 1.13 ProcessGroupNCCL.cpp watchdog, one SeqNum, different OpType",
     W113.format(r=0, n=88, op="ALLREDUCE", shape="1")
     + W113.format(r=1, n=88, op="BROADCAST", shape="1"),
     "torch.collective_mismatch"),
    ("torch 2.14 ProcessGroupNCCL.cpp watchdog, [PG ID ... Rank N], different SeqNum",
     W214.format(r=0, pg=0, desc="default_pg", n=7, op="ALLREDUCE")
     + W214.format(r=1, pg=0, desc="default_pg", n=9, op="_ALLGATHER_BASE"),
     "torch.collective_mismatch"),
    ("torch 1.13 fsdp flat_param.py FlatParamHandle._init_flat_param",
     "ValueError: `FlatParameter` requires uniform `requires_grad`",
     "torch.fsdp_mixed_requires_grad"),
    ("torch 2.0+ fsdp _flat_param.py _validate_tensors_to_flatten, a rank's line",
     "[rank3]: ValueError: Must flatten tensors with uniform `requires_grad` when "
     "`use_orig_params=False`",
     "torch.fsdp_mixed_requires_grad"),
]
LINES += PHASE_I

# Phase J (not from a batch's miss): the environment of compiled extensions, written from
# the sources that print its texts. glibc's dynamic loader (elf/dl-lookup.c 'undefined
# symbol: NAME', elf/dl-load.c 'cannot open shared object file', read back through
# dlerror as 'PATH: MESSAGE', which CPython's Python/dynload_shlib.c raises as the
# ImportError's message and ctypes as OSError's; both seen here with glibc 2.36);
# torch/utils/cpp_extension.py (the wheels of 1.13.1 and 2.13.0); torch/__init__.py
# _preload_cuda_deps (2.13.0); DeepSpeed's op_builder/builder.py (0.16.4); accelerate's
# state.py (0.26.1, 0.28.0, 1.15.0); c10/cuda/CUDACachingAllocator.cpp
# reportProcessMemoryInfo's NVML assertion (pytorch#112121, #185946).
PHASE_J = [
    ("glibc dl-lookup.c via CPython dynload_shlib.c: flash-attn built for another torch",
     "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-"
     "x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
     "extension.torch_mismatch"),
    ("glibc dl-lookup.c: an at:: operator, apex's extension, a rank's line",
     "[rank1]: ImportError: /opt/conda/lib/python3.10/site-packages/fused_layer_norm_cuda."
     "cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZNK2at10TensorBase8data_ptrIfEEPT_v",
     "extension.torch_mismatch"),
    ("glibc dl-lookup.c via ctypes: a torch:: function, an OSError of CDLL",
     "OSError: /home/u/.cache/torch_extensions/py310_cu121/fused_adam/fused_adam.so: undefined "
     "symbol: _ZN5torch8autograd12VariableInfoC1ERKN2at6TensorE",
     "extension.torch_mismatch"),
    ("glibc dl-lookup.c: torchvision's _C.so built for another torch",
     "ImportError: /usr/lib/python3/dist-packages/torchvision/_C.so: undefined symbol: "
     "_ZN3c1017RegisterOperatorsD1Ev",
     "torch.torchvision_mismatch"),
    ("glibc dl-lookup.c: torch's libtorch_cuda.so against an older libnccl.so.2",
     "ImportError: /home/u/.local/lib/python3.9/site-packages/torch/lib/libtorch_cuda.so: "
     "undefined symbol: ncclCommRegister",
     "nccl.older_library"),
    ("glibc dl-lookup.c: torch/_C's own library, NCCL 2.19's ncclCommSplit",
     "ImportError: /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: "
     "undefined symbol: ncclCommSplit",
     "nccl.older_library"),
    ("glibc dl-load.c via CPython: the CUDA 11 runtime missing",
     "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
     "cuda.library_missing"),
    ("glibc dl-load.c via ctypes: cuDNN 9 missing",
     "OSError: libcudnn.so.9: cannot open shared object file: No such file or directory",
     "cuda.library_missing"),
    ("glibc dl-load.c: libnccl.so.2 missing",
     "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
     "cuda.library_missing"),
    ("torch 2.x __init__.py _preload_cuda_lib: a CUDA library of pip's nvidia-* missing",
     "ValueError: libcublas.so.*[0-9] not found in the system path ['/home/u', "
     "'/usr/lib/python311.zip']",
     "cuda.library_missing"),
    ("glibc dl-load.c: the driver's libcuda.so.1 missing (no NVIDIA runtime)",
     "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
     "device.no_gpu"),
    ("torch 1.13 cpp_extension.py _check_cuda_version (message after a newline)",
     "RuntimeError: \nThe detected CUDA version (12.1) mismatches the version that was used "
     "to compile\nPyTorch (11.8). Please make sure to use the same CUDA versions.",
     "extension.cuda_mismatch"),
    ("torch 2.13 cpp_extension.py _check_cuda_version (RuntimeError of the format and args)",
     "RuntimeError: ('The detected CUDA version (%s) mismatches the version that was used to "
     "compilePyTorch (%s). Please make sure to use the same CUDA versions.', '13.0', '12.8')",
     "extension.cuda_mismatch"),
    ("deepspeed 0.16 op_builder/builder.py assert_no_cuda_mismatch",
     "deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: "
     "Installed CUDA version 12.4 does not match the version torch was compiled with 11.8, "
     "unable to compile cuda/cpp extensions without a matching cuda version.",
     "extension.cuda_mismatch"),
    ("torch 1.13 cpp_extension.py _join_cuda_home (EnvironmentError, printed as OSError)",
     "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install "
     "root.",
     "extension.cuda_home"),
    ("torch 2.13 cpp_extension.py _check_cuda_version, CUDA_HOME unset",
     "RuntimeError: CUDA was not found on the system, please set the CUDA_HOME or the "
     "CUDA_PATHenvironment variable or add NVCC to your system PATH. The extension "
     "compilation will fail.",
     "extension.cuda_home"),
    ("torch 2.13 cpp_extension.py _check_cuda_version, CUDA_HOME without nvcc",
     "FileNotFoundError: nvcc not found at '/usr/local/cuda/bin/nvcc'. Ensure CUDA path "
     "'/usr/local/cuda' is correct.",
     "extension.cuda_home"),
    ("deepspeed op_builder/builder.py installed_cuda_version, before MissingCUDAException",
     "AssertionError: CUDA_HOME does not exist, unable to compile CUDA op(s)",
     "extension.cuda_home"),
    ("torch 1.13 cpp_extension.py verify_ninja_availability",
     "RuntimeError: Ninja is required to load C++ extensions",
     "extension.ninja_missing"),
    ("accelerate 0.28-1.15 state.py PartialState",
     "NotImplementedError: Using RTX 4000 series doesn't support faster communication "
     "broadband via P2P or IB. Please set `NCCL_P2P_DISABLE=\"1\"` and `NCCL_IB_DISABLE=\"1\" "
     "or use `accelerate launch` which will do this automatically.",
     "cuda.p2p_unsupported"),
    ("accelerate 0.26 state.py PartialState",
     "NotImplementedError: Using RTX 3090 or 4000 series doesn't support faster communication "
     "broadband via P2P or IB. Please set `NCCL_P2P_DISABLE=\"1\"` and `NCCL_IB_DISABLE=\"1\" "
     "or use `accelerate launch` which will do this automatically.",
     "cuda.p2p_unsupported"),
    ("torch 2.1+ CUDACachingAllocator.cpp reportProcessMemoryInfo, an OOM NVML cannot report",
     "RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at \"../c10/cuda/"
     "CUDACachingAllocator.cpp\":1154, please report a bug to PyTorch.",
     "cuda.out_of_memory"),
    ("torch CUDACachingAllocator.cpp reportProcessMemoryInfo, NVML's device handle",
     "RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlDeviceGetHandleByPciBusId_v2_( "
     "pci_id, &nvml_device) INTERNAL ASSERT FAILED at \"../c10/cuda/CUDACachingAllocator.cpp\""
     ":815, please report a bug to PyTorch.",
     "cuda.out_of_memory"),
]
LINES += PHASE_J


# Phase K (after batch 14 was measured): batch 14's misses, written from the sources of
# their texts. NCCL's CUDACHECK (src/include/checks.h: WARN("Cuda failure '%s'",
# cudaGetErrorString(err))) around its own kernels' look-ups at init (src/enqueue.cc:
# cudaFuncGetAttributes and cudaFuncSetAttribute on each kernel, NCCL 2.10 to 2.30;
# cudaGetFuncBySymbol in 2.27): cudaErrorSymbolNotFound where NCCL's build has no
# kernel for the GPU. torch 1.0's previews (ProcessGroupNCCL::barrier threw until
# pytorch#14142; the 1.0.0 wheel holds no such refusal). FSDP2's fully_shard and the
# composable replicate (__deepcopy__ raises AssertionError; 2.4.0, 2.13.0, 2.14.1).
# Lightning's DDPStrategy.on_exception (lightning 2.0.0-2.6.6: _augment_message puts its
# words in place of torch's before Python 3.11). torchrun's determine_local_world_size
# (run.py, 1.13.1 to 2.14.1). CPython's subprocess.py _execute_child (a bare program name
# looked up on PATH). CPython's call errors raised in the caller's frame, an installed
# package's, against another installed package.
LIB = "/opt/conda/lib/python3.10/site-packages/"
SUBPROCESS_FRAMES = (
    '  File "/usr/lib/python3.10/subprocess.py", line 503, in run\n'
    "    with Popen(*popenargs, **kwargs) as process:\n"
    '  File "/usr/lib/python3.10/subprocess.py", line 971, in __init__\n'
    "    self._execute_child(args, executable, preexec_fn, close_fds,\n"
    '  File "/usr/lib/python3.10/subprocess.py", line 1863, in _execute_child\n'
    "    raise child_exception_type(errno_num, err_msg, err_filename)\n")
PHASE_K = [
    ("nccl 2.21 enqueue.cc:47 ncclInitKernelsForDevice, a build without this GPU's arch",
     "h1:72:456 [0] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'",
     "cuda.no_kernel_image"),
    ("nccl checks.h, after torch's 'Last error:' (the NCCL error it explains)",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
     "NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
     "version 2.21.5\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
     "Cuda failure 'named symbol not found'",
     "cuda.no_kernel_image"),
    ("torch 1.0 previews ProcessGroupNCCL.cpp ProcessGroupNCCL::barrier",
     "RuntimeError: ProcessGroupNCCL does not support barrier",
     "torch.release_lacks_feature"),
    ("torch 2.4-2.14 fully_shard's _unimplemented_deepcopy, a rank's line",
     "[rank1]: AssertionError: FSDP does not support deepcopy. Please use state dict for "
     "serialization.",
     "torch.pickle_process_group"),
    ("torch 2.4-2.14 _composable/replicate.py unimplemented_deepcopy",
     "AssertionError: DDP does not support deepcopy. Please use state dict for serialization.",
     "torch.pickle_process_group"),
    ("fully_shard's refusal as a framework's warning quotes it (no 'Error' on the line)",
     "[2025-01-10 10:00:00] ema.py:88 - EMA copy skipped: FSDP does not support deepcopy. "
     "Please use state dict for serialization.",
     "torch.pickle_process_group"),
    ("lightning 2.0-2.6 strategies/ddp.py DDPStrategy.on_exception (Python < 3.11)",
     "[rank1]: RuntimeError: It looks like your LightningModule has parameters that were not "
     "used in producing the loss returned by training_step. If this is intentional, you must "
     "enable the detection of unused parameters in DDP, either by setting the string value "
     "`strategy='ddp_find_unused_parameters_true'` or by setting the flag in the strategy "
     "with `strategy=DDPStrategy(find_unused_parameters=True)`.",
     "torch.ddp_unused_parameters"),
    ("torch 2.x run.py determine_local_world_size, under torchrun's console script",
     'Traceback (most recent call last):\n  File "/usr/local/bin/torchrun", line 8, in '
     "<module>\n    sys.exit(main())\n"
     '  File "' + LIB + 'torch/distributed/run.py", line 885, in determine_local_world_size\n'
     "    raise ValueError(\n"
     "ValueError: Unsupported nproc_per_node value: gpus",
     "launch.nproc_per_node_invalid"),
    ("torch 1.13 run.py determine_local_world_size, an empty value",
     "ValueError: Unsupported nproc_per_node value: ",
     "launch.nproc_per_node_invalid"),
    ("CPython subprocess.py _execute_child: the job's call of a command not on PATH",
     'Traceback (most recent call last):\n  File "/home/u/train.py", line 40, in <module>\n'
     '    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True)\n'
     + SUBPROCESS_FRAMES + "FileNotFoundError: [Errno 2] No such file or directory: "
     "'nvidia-smi'",
     "host.command_missing"),
    ("lightning 1.1 slurm_connector.py sig_handler, a rank's lines",
     '[rank0]: Traceback (most recent call last):\n[rank0]:   File "' + LIB
     + 'pytorch_lightning/trainer/connectors/slurm_connector.py", line 97, in sig_handler\n'
     "[rank0]:     result = call(cmd)\n"
     + "".join("[rank0]: " + x + "\n" for x in SUBPROCESS_FRAMES.splitlines())
     + "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: 'scontrol'",
     "host.command_missing"),
    ("CPython 3.8 call error (no qualname) raised in torch elastic's frame, DeepSpeed's "
     "override",
     'Traceback (most recent call last):\n  File "/usr/lib/python3.8/runpy.py", line 194, in '
     "_run_module_as_main\n    return _run_code(code, main_globals, None,\n"
     '  File "' + LIB + 'deepspeed/launcher/launch.py", line 308, in main\n    agent.run()\n'
     '  File "' + LIB + 'deepspeed/elasticity/elastic_agent.py", line 126, in _invoke_run\n'
     "    self._initialize_workers(self._worker_group)\n"
     '  File "' + LIB + 'torch/distributed/elastic/agent/server/api.py", line 556, in '
     "_rendezvous\n    self._set_master_addr_port(\n"
     "TypeError: _set_master_addr_port() takes 3 positional arguments but 4 were given",
     "env.package_version"),
    ("CPython Objects/moduleobject.c: a package's module reading a torch name the "
     "installed torch lacks",
     'Traceback (most recent call last):\n  File "/home/u/train.py", line 3, in <module>\n'
     "    from accelerate import Accelerator\n"
     '  File "' + LIB + 'accelerate/utils/other.py", line 88, in <module>\n'
     "    from torch.distributed.device_mesh import DeviceMesh\n"
     "AttributeError: module 'torch.distributed' has no attribute 'device_mesh'",
     "env.package_version"),
]
LINES += PHASE_K


# Phase L (after batch 15 was measured): batch 15's misses, written from the sources of
# their texts. torch.distributed.launch's main (1.1 to 1.7: 'raise
# subprocess.CalledProcessError(returncode=process.returncode, cmd=...)'; 1.8: its
# sigkill_handler) and accelerate launch's simple_launcher, in the launcher's own frame.
# CPython's forks (multiprocessing popen_fork.py _launch 'self.pid = os.fork()', util.py
# spawnv_passfds, subprocess.py _execute_child's _fork_exec): fork's ENOMEM. urllib's
# port property (parse.py: 3.6-3.7's int(port, 10), 'Port could not be cast to integer
# value as {port!r}' from 3.8) under
# torch's _tcp_rendezvous_handler (rendezvous.py: 1.4's 'if not result.port', 2.13's 'if
# result.port is None'), an IPv6 address without brackets. torch's
# caffe2/serialize/inline_container.cc ('PytorchStreamReader failed ' WHAT ': ' and
# miniz's error, 1.6.0, 1.10.0, 2.13.0). DeepSpeed's runner.py parse_resource_filter
# ('No slot '{}' specified on host '{}'', 0.3.x's str.format and later f-strings).
# torch's tensor_numpy.cpp (1.0-1.5: 'can't convert CUDA tensor to numpy. Use
# Tensor.cpu() to copy the tensor to host memory first.'). CPython's pythonrun.c writes
# of an exception line (type, ': ', message) mixed with another rank's source line.
PY37 = "/opt/conda/lib/python3.7/"


def _tb(*frames):
    """A whole traceback's lines, one (path, line, function, source) per frame."""
    return "Traceback (most recent call last):\n" + "".join(
        '  File "%s", line %d, in %s\n    %s\n' % f for f in frames)


LAUNCH_RUNPY = ('Traceback (most recent call last):\n'
                '  File "' + PY37 + 'runpy.py", line 193, in _run_module_as_main\n'
                '    "__main__", mod_spec)\n'
                '  File "' + PY37 + 'runpy.py", line 85, in _run_code\n'
                '    exec(code, run_globals)\n')
PHASE_L = [
    ("torch 1.6 launch.py main, the last rank's command line (cmd=cmd)",
     LAUNCH_RUNPY + '  File "' + PY37 + 'site-packages/torch/distributed/launch.py", line '
     "260, in <module>\n    main()\n"
     '  File "' + PY37 + 'site-packages/torch/distributed/launch.py", line 256, in main\n'
     "    cmd=cmd)\nsubprocess.CalledProcessError: Command '['/opt/conda/bin/python', '-u', "
     "'train.py', '--local_rank=3']' returned non-zero exit status 1.",
     "launch.subprocess_failed"),
    ("torch 1.8 launch.py sigkill_handler, called from main's poll loop",
     LAUNCH_RUNPY + '  File "' + PY37 + 'site-packages/torch/distributed/launch.py", line '
     "326, in main\n    sigkill_handler(signal.SIGTERM, None)  # not coming back\n"
     '  File "' + PY37 + 'site-packages/torch/distributed/launch.py", line 301, in '
     "sigkill_handler\n    raise subprocess.CalledProcessError(returncode=last_return_code, "
     "cmd=cmd)\nsubprocess.CalledProcessError: Command '['/opt/conda/bin/python', '-u', "
     "'train.py', '--local_rank=1']' returned non-zero exit status 2.",
     "launch.subprocess_failed"),
    ("accelerate 1.15.0 commands/launch.py simple_launcher (made here, torch 2.13.0)",
     'Traceback (most recent call last):\n  File "/work/.venv/bin/accelerate", line 6, in '
     "<module>\n    sys.exit(main())\n             ^^^^^^\n"
     '  File "/work/.venv/lib/python3.11/site-packages/accelerate/commands/accelerate_cli.py",'
     " line 50, in main\n    args.func(args)\n"
     '  File "/work/.venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line '
     "1413, in launch_command\n    simple_launcher(args)\n"
     '  File "/work/.venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line '
     "999, in simple_launcher\n    raise subprocess.CalledProcessError(returncode=process."
     "returncode, cmd=cmd)\nsubprocess.CalledProcessError: Command '['/work/.venv/bin/python',"
     " 'train.py']' returned non-zero exit status 1.",
     "launch.subprocess_failed"),
    ("CPython 3.11 multiprocessing popen_fork.py _launch: a DataLoader's workers forked",
     _tb(("/home/u/train.py", 88, "main", "for batch in loader:"),
         (LIB + "torch/utils/data/dataloader.py", 1090, "__init__", "w.start()"),
         ("/usr/lib/python3.11/multiprocessing/process.py", 121, "start",
          "self._popen = self._Popen(self)"),
         ("/usr/lib/python3.11/multiprocessing/popen_fork.py", 66, "_launch",
          "self.pid = os.fork()"))
     + "OSError: [Errno 12] Cannot allocate memory",
     "host.fork_memory"),
    ("CPython 3.11 subprocess.py _execute_child's _fork_exec, a rank's lines",
     "".join("[rank2]: " + x + "\n" for x in _tb(
         ("/home/u/train.py", 40, "save", "subprocess.run(['gzip', path], check=True)"),
         ("/usr/lib/python3.11/subprocess.py", 548, "run",
          "with Popen(*popenargs, **kwargs) as process:"),
         ("/usr/lib/python3.11/subprocess.py", 1026, "__init__",
          "self._execute_child(args, executable, preexec_fn, close_fds,"),
         ("/usr/lib/python3.11/subprocess.py", 1834, "_execute_child",
          "self.pid = _fork_exec(")).splitlines())
     + "[rank2]: OSError: [Errno 12] Cannot allocate memory",
     "host.fork_memory"),
    ("CPython 3.11 multiprocessing util.py spawnv_passfds (the spawn start method)",
     _tb(("/home/u/train.py", 20, "main", "p.start()"),
         ("/usr/lib/python3.11/multiprocessing/popen_spawn_posix.py", 62, "_launch",
          "self.pid = util.spawnv_passfds(spawn.get_executable(),"),
         ("/usr/lib/python3.11/multiprocessing/util.py", 453, "spawnv_passfds",
          "return _posixsubprocess.fork_exec("))
     + "OSError: [Errno 12] Cannot allocate memory",
     "host.fork_memory"),
    ("torch 2.13 rendezvous.py _tcp_rendezvous_handler, urllib 3.11 (made here)",
     _tb(("/home/u/train.py", 5, "<module>", 'dist.init_process_group("gloo", '
          'init_method="tcp://2001:db8::5:29500", rank=0, world_size=1)'),
         (LIB + "torch/distributed/distributed_c10d.py", 1892, "init_process_group",
          "store, rank, world_size = next(rendezvous_iterator)"),
         (LIB + "torch/distributed/rendezvous.py", 217, "_tcp_rendezvous_handler",
          "if result.port is None:"),
         ("/root/.pyenv/versions/3.11.7/lib/python3.11/urllib/parse.py", 182, "port",
          'raise ValueError(f"Port could not be cast to integer value as {port!r}")'))
     + "ValueError: Port could not be cast to integer value as 'db8::5:29500'",
     "rendezvous.ipv6_unbracketed"),
    ("torch 1.4 rendezvous.py _tcp_rendezvous_handler ('if not result.port'), CPython 3.7's "
     "int() in urllib's port, a rank's lines",
     "".join("[rank0]: " + x + "\n" for x in _tb(
         (PY37 + "site-packages/torch/distributed/distributed_c10d.py", 400,
          "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
         (PY37 + "site-packages/torch/distributed/rendezvous.py", 109,
          "_tcp_rendezvous_handler", "if not result.port:"),
         (PY37 + "urllib/parse.py", 172, "port", "port = int(port, 10)")).splitlines())
     + "[rank0]: ValueError: invalid literal for int() with base 10: ':1:29500'",
     "rendezvous.ipv6_unbracketed"),
    ("torch 2.13 inline_container.cc, a file cut short (made here)",
     "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central "
     "directory. This is an internal miniz error. If you are seeing this error, there is a "
     "high likelihood that your checkpoint file is corrupted. This can happen if the "
     "checkpoint was not saved properly, was transferred incorrectly, or the file was "
     "modified after saving.",
     "checkpoint.corrupt"),
    ("torch 1.6-1.10 inline_container.cc, a damaged entry, a rank's line",
     "[rank3]: RuntimeError: PytorchStreamReader failed reading file data/94206583: invalid "
     "header or archive is corrupted",
     "checkpoint.corrupt"),
    ("torch 1.10 inline_container.cc, miniz's CRC check",
     "RuntimeError: PytorchStreamReader failed reading file data/0: CRC-32 check failed",
     "checkpoint.corrupt"),
    ("deepspeed 0.3.10 runner.py parse_resource_filter (str.format), a hostfile's slot",
     "ValueError: No slot '4' specified on host 'worker-1'",
     "launch.deepspeed_include_slot"),
    ("torch 1.0-1.5 tensor_numpy.cpp, raised from Tensor.__array__ in the job's frame",
     _tb(("/home/u/eval.py", 31, "reduce_metrics", "np.array(counts)"),
         (PY37 + "site-packages/torch/tensor.py", 458, "__array__", "return self.numpy()"))
     + "TypeError: can't convert CUDA tensor to numpy. Use Tensor.cpu() to copy the tensor to "
     "host memory first.",
     "program.exception"),
    ("CPython pythonrun.c: a built-in type, another rank's source line glued to it, the "
     "message on the next line",
     'Traceback (most recent call last):\n  File "/home/u/train.py", line 56, in main\n'
     "    torch.save(sampler.state_dict(), path)\n"
     "    AttributeErrortrainer.train(): \n"
     "'DistributedSampler' object has no attribute 'state_dict'",
     "program.exception"),
]
LINES += PHASE_L

# Phase M of issue #34 (after batch 16 was measured): each wording as its source prints it
# (torch's default_planner.py, fsdp/_init_utils.py, distributed_c10d.py and
# nn/parallel/distributed.py read in the wheels of 1.0.0 to 2.13.0; vLLM's
# csrc/cumem_allocator.cpp; accelerate's commands/launch.py, accelerator.py and
# big_modeling.py in the wheels of 0.16.0, 0.20.3 and 1.15.0; CPython's call and import
# errors). Every one fails on the rules before phase M (e7bf20d).
PY311 = "/opt/conda/lib/python3.11/"
LIB311 = PY311 + "site-packages/"
OWN_M = ("/home/u/train.py", 120, "main", "model = setup(cfg)")
FSDP_M = ((LIB311 + "torch/distributed/fsdp/fully_sharded_data_parallel.py", 439, "__init__",
           "_init_process_group_state("),
          (LIB311 + "torch/distributed/fsdp/_init_utils.py", 113, "_init_process_group_state",
           "state = _init_process_group_state_for_hybrid_shard("),
          (LIB311 + "torch/distributed/fsdp/_init_utils.py", 160,
           "_init_process_group_state_for_hybrid_shard",
           "intra_node_group, inter_node_group = _init_intra_and_inter_node_groups("),
          (LIB311 + "torch/distributed/fsdp/_init_utils.py", 266,
           "_init_intra_and_inter_node_groups",
           "_init_intra_node_process_group(num_devices_per_node),"))
PHASE_M = [
    ("torch 2.11-2.13 checkpoint/default_planner.py create_default_local_load_plan, the key "
     "on the next line as posted",
     "RuntimeError: Missing key in checkpoint state_dict:\n"
     "    optimizer.state.model.layers.3.mlp.w1.weight.exp_avg",
     "torch.dcp_missing_key"),
    ("vLLM csrc/cumem_allocator.cpp CUDA_CHECK (cuGetErrorString of CUDA_ERROR_OUT_OF_MEMORY), "
     "raised by its Python side",
     "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
     "cuda.out_of_memory"),
    ("vLLM csrc/cumem_allocator.cpp CUDA_CHECK, the line its std::cerr prints",
     "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:75",
     "cuda.out_of_memory"),
    ("accelerate 0.16.0 commands/launch.py multi_gpu_launcher, the message alone",
     "Native multi-GPU training requires pytorch>=1.9.1",
     "env.package_version"),
    ("accelerate 0.16.0 commands/launch.py multi_gpu_launcher, NotImplementedError",
     "NotImplementedError: Native multi-GPU training requires pytorch>=1.9.1",
     "env.package_version"),
    ("accelerate 0.20.3 commands/launch.py multi_gpu_launcher (accelerate#1203)",
     "NotImplementedError: Native multi-GPU training through `accelerate launch` requires "
     "pytorch>=1.9.1. Please call `torch.distributed.launch` directly instead.",
     "env.package_version"),
    ("accelerate 0.16.0 commands/launch.py, multi-node",
     "NotImplementedError: Multi-node training requires pytorch>=1.9.1",
     "env.package_version"),
    ("accelerate 1.15.0 accelerator.py, FSDP_PYTORCH_VERSION",
     "ValueError: FSDP requires PyTorch >= 2.1.0.a0+32f93b1",
     "env.package_version"),
    ("accelerate 1.15.0 accelerator.py, FSDP2_PYTORCH_VERSION (an ImportError)",
     "ImportError: FSDP2 requires PyTorch >= 2.6.0",
     "env.package_version"),
    ("accelerate 0.20.3 accelerator.py join_uneven_inputs",
     "ValueError: Joining uneven inputs requires PyTorch >= 1.10.0, You have 1.9.0+cu111.",
     "env.package_version"),
    ("accelerate 0.20.3 big_modeling.py cpu_offload",
     "NotImplementedError: CPU offloading requires torch >= 1.9.0",
     "env.package_version"),
    ("CPython 3.12 ceval.c import_from in an installed package's module, a name of torch's "
     "module",
     _tb(OWN_M, (LIB311 + "torchtitan/models/llama4/__init__.py", 24, "<module>",
                 "from .parallelize import parallelize_llama"),
         (LIB311 + "torchtitan/models/llama4/parallelize.py", 13, "<module>",
          "from torch.distributed.fsdp._fully_shard._fsdp_common import ("))
     + "ImportError: cannot import name 'ShardPlacementResult' from "
     "'torch.distributed.fsdp._fully_shard._fsdp_common' (" + LIB311
     + "torch/distributed/fsdp/_fully_shard/_fsdp_common.py)",
     "env.package_version"),
    ("torch 2.13 fsdp/_init_utils.py _init_intra_node_process_group, new_subgroups' refusal",
     _tb(OWN_M, *FSDP_M,
         (LIB311 + "torch/distributed/fsdp/_init_utils.py", 212,
          "_init_intra_node_process_group",
          "intra_node_subgroup, _ = dist.new_subgroups(num_devices_per_node)"),
         (LIB311 + "torch/distributed/distributed_c10d.py", 6190, "new_subgroups",
          "raise ValueError("))
     + "ValueError: The arg 'group_size' (8) must not exceed the world size (2)",
     "torch.fsdp_hybrid_shard_devices"),
    ("torch 2.0 fsdp/_init_utils.py _init_intra_node_process_group, new_subgroups() "
     "defaulting to torch.cuda.device_count()",
     _tb(OWN_M, *FSDP_M[:3],
         (LIB311 + "torch/distributed/fsdp/_init_utils.py", 177,
          "_init_intra_node_process_group", "intra_node_subgroup, _ = dist.new_subgroups()"),
         (LIB311 + "torch/distributed/distributed_c10d.py", 3632, "new_subgroups",
          "raise ValueError(f\"The arg 'group_size' ({group_size}) must not exceed the "
          "world size ({world_size})\")"))
     + "ValueError: The arg 'group_size' (4) must not exceed the world size (1)",
     "torch.fsdp_hybrid_shard_devices"),
    ("torch 1.0.0 nn/parallel/distributed.py __init__ (no find_unused_parameters before "
     "1.1.0), CPython 3.7",
     _tb(("/home/u/train.py", 88, "main",
          "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank], "
          "find_unused_parameters=True)"))
     + "TypeError: __init__() got an unexpected keyword argument 'find_unused_parameters'",
     "torch.release_lacks_feature"),
    ("torch 2.11.0 distributed_c10d.py barrier (timeout from 2.12), CPython 3.11 carets",
     _tb(("/home/u/train.py", 40, "main",
          "torch.distributed.barrier(timeout=timedelta(minutes=30))"))
     + "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
     "TypeError: barrier() got an unexpected keyword argument 'timeout'",
     "torch.release_lacks_feature"),
    ("torch 2.0.0 DistributedDataParallel.__init__ (init_sync read from 2.11.0), CPython "
     "3.10's qualified name",
     _tb(("/home/u/train.py", 51, "wrap",
          "ddp = nn.parallel.DistributedDataParallel(model, init_sync=False)"))
     + "TypeError: DistributedDataParallel.__init__() got an unexpected keyword argument "
     "'init_sync'",
     "torch.release_lacks_feature"),
]
LINES += PHASE_M

# Phase N of issue #34 (after batch 17 was measured): each wording as its source prints it
# (NCCL's src/transport.cc, src/misc/ipcsocket.cc and src/misc/socket.cc at the release
# tags named; torch's c10/cuda/CUDACachingAllocator.cpp, generic/serialization.cpp and
# serialization.cpp read in the wheels of 1.0.0 to 2.13.0; CPython's import system and
# two-path OSError; Slurm's gres.c, slurm_opt.c and sbatch.c; DeepSpeed's
# multinode_runner.py and runner.py; transformers' dynamic_module_utils.py and the auto
# classes of 4.26.1). Every one fails on the rules before phase N (7375200).
PHASE_N = [
    ("nccl 2.18.5 src/transport.cc:174 (the recv side), CUDACHECKGOTO's WARN",
     "node3:2201:2290 [1] transport.cc:174 NCCL WARN Cuda failure 'invalid argument'",
     "nccl.release_bug"),
    ("nccl 2.19.1 src/transport.cc:154, under torch's rank prefix",
     "[rank3]:node7:5512:5590 [3] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'",
     "nccl.release_bug"),
    ("nccl 2.20.3 src/misc/ipcsocket.cc:57 ncclIpcSocketInit, the proxy's UDS socket of a "
     "split communicator",
     "gpu-12:40:1733 [0] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket "
     "/tmp/nccl-socket-0-5d1e0c2a9b7f3e41 failed : Address already in use (98)",
     "nccl.release_bug"),
    ("nccl 2.18.3 src/misc/socket.cc:431 socketFinalizeAccept, an HTTP HEAD request "
     "('HEAD / H')",
     "h1:11:22 [0] misc/socket.cc:431 NCCL WARN socketFinalizeAccept: wrong magic "
     "48202f2044414548 != 26c0f9a4e3e2b4f1",
     "nccl.foreign_connection"),
    ("nccl 2.24.3 src/misc/socket.cc:483 socketFinalizeAccept, an SSH client's banner "
     "('SSH-2.0-')",
     "h1:11:22 [2] misc/socket.cc:483 NCCL WARN socketFinalizeAccept: wrong magic "
     "2d302e322d485353 != b17e3a0c55d9f2a8",
     "nccl.foreign_connection"),
    ("CPython 3.11 importlib (ModuleNotFoundError), an installed package's module importing "
     "a module of its own package",
     _tb(OWN_M, (LIB311 + "megatron/core/dist_checkpointing/strategies/torch.py", 71,
                 "<module>", "from .filesystem_async import FileSystemWriterAsync"))
     + "ModuleNotFoundError: No module named "
     "'megatron.core.dist_checkpointing.strategies.filesystem_async'",
     "env.package_incomplete"),
    ("CPython 3.5 importlib (ImportError, before ModuleNotFoundError), a package's "
     "__init__.py importing its own module",
     _tb(("/home/u/train.py", 5, "<module>", "import flash_attn"),
         ("/usr/local/lib/python3.5/dist-packages/flash_attn/__init__.py", 3, "<module>",
          "from flash_attn.flash_attn_interface import flash_attn_func"))
     + "ImportError: No module named 'flash_attn.flash_attn_interface'",
     "env.package_incomplete"),
    ("torch 2.12.1 c10/cuda/CUDACachingAllocator.cpp (libc10_cuda.so): pidfd_getfd refused, "
     "a CUDA tensor from a queue",
     _tb(("/home/u/train.py", 77, "consume", "batch = queue.get()"),
         ("/usr/lib/python3.10/multiprocessing/queues.py", 122, "get",
          "return _ForkingPickler.loads(res)"),
         (LIB311 + "torch/multiprocessing/reductions.py", 181, "rebuild_cuda_tensor",
          "storage = storage_cls._new_shared_cuda("),
         (LIB311 + "torch/storage.py", 1452, "_new_shared_cuda",
          "return torch.UntypedStorage._new_shared_cuda(*args, **kwargs)"))
     + "RuntimeError: pidfd_getfd: Operation not permitted",
     "cuda.ipc_expandable_segments"),
    ("torch 2.12.1 CUDACachingAllocator.cpp: pidfd_open refused",
     "RuntimeError: pidfd_open: Operation not permitted",
     "cuda.ipc_expandable_segments"),
    ("torch 2.12.1 CUDACachingAllocator.cpp: a kernel without pidfd_getfd (ENOSYS)",
     "RuntimeError: The kernel on this machine does not support the pidfd_getfd syscall "
     "needed to use IPC for CUDA tensors when expandable_segments:True is set. Consider "
     "using expandable_segments:False via torch.cuda.memory._set_allocator_settings("
     "'expandable_segments:False') for this allocation.",
     "cuda.ipc_expandable_segments"),
    ("CPython Objects/exceptions.c OSError_str (two paths): os.symlink on a FUSE drive, "
     "EOPNOTSUPP",
     "OSError: [Errno 95] Operation not supported: 'checkpoint-500' -> "
     "'/content/drive/MyDrive/run/latest'",
     "host.filesystem_unsupported"),
    ("CPython OSError_str (two paths): os.replace on a mount without rename, ENOSYS",
     "OSError: [Errno 38] Function not implemented: '/mnt/gcs/ckpt/last.pt.tmp' -> "
     "'/mnt/gcs/ckpt/last.pt'",
     "host.filesystem_unsupported"),
    ("Slurm 21.08 src/common/gres.c gres_job_state_validate, under srun",
     "srun: error: Failed to validate job spec. --gpus-per-task used without either --gpus "
     "or -n/--ntasks is not allowed.",
     "launch.slurm_gres_refused"),
    ("Slurm 24.05 src/interfaces/gres.c: --gpus not a multiple of --gpus-per-task",
     "sbatch: error: Failed to validate job spec, --gpus not multiple of --gpus-per-task",
     "launch.slurm_gres_refused"),
    ("Slurm src/sbatch/sbatch.c: the controller's ESLURM_INVALID_GRES "
     "(src/common/slurm_errno.c)",
     "sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
     "specification",
     "launch.slurm_gres_refused"),
    ("DeepSpeed 0.8 multinode_runner.py PDSHRunner.get_cmd ('pdsh -f 1024 -w'), "
     ".deepspeed_env's Slurm variable",
     "[2023-02-01 10:00:00,000] [INFO] [runner.py:508:main] cmd = pdsh -f 1024 -w "
     "node1,node2 export NCCL_IB_DISABLE=0; export SLURM_TASKS_PER_NODE=8(x2);  cd "
     "/home/u/proj; /opt/conda/bin/python -u -m deepspeed.launcher.launch "
     "--world_info=eyJub2RlMSI6IFswXX0= --node_rank=%n --master_addr=node1 "
     "--master_port=29500 train.py",
     "launch.deepspeed_export_unquoted"),
    ("DeepSpeed 0.14 ('pdsh -S -f 1024 -w'), an exported MLFLOW variable",
     "[2024-05-02 09:12:44,101] [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w "
     "gpu01,gpu02 export PYTHONPATH=/home/u/proj; export MLFLOW_RUN_NAME=sft(v2);  cd "
     "/home/u/proj; /usr/bin/python3 -u -m deepspeed.launcher.launch "
     "--world_info=eyJncHUwMSI6IFswXX0= --node_rank=%n --master_addr=gpu01 "
     "--master_port=29500 train.py",
     "launch.deepspeed_export_unquoted"),
    ("torch 1.4 generic/serialization.cpp THPStorage_(readFileRaw), the legacy reader",
     "RuntimeError: storage has wrong size: expected 4096 got 1024",
     "checkpoint.corrupt"),
    ("torch 2.0 serialization.cpp THPStorage_readFileRaw, the legacy reader's byte size",
     "RuntimeError: storage has wrong byte size: expected 16384 got 4096",
     "checkpoint.corrupt"),
    ("torch 1.0-2.13 serialization.cpp doRead, a legacy file cut short",
     "RuntimeError: unexpected EOF, expected 851968 more bytes. The file might be corrupted.",
     "checkpoint.corrupt"),
    ("transformers 4.57.6 dynamic_module_utils.py resolve_trust_remote_code, a repository "
     "whose name holds NVIDIA",
     "ValueError: The repository nvidia/NVIDIA-Nemotron-Nano-9B-v2 contains custom code "
     "which must be executed to correctly load the model. You can inspect the repository "
     "content at https://hf.co/nvidia/NVIDIA-Nemotron-Nano-9B-v2 .",
     "program.exception"),
    ("transformers 4.26.1 models/auto/configuration_auto.py, a local path holding CUDA",
     "ValueError: Loading /data/cuda-models/chatglm2-6b requires you to execute the "
     "configuration file in that repo on your local machine. Make sure you have read the "
     "code there to avoid malicious use, then set the option `trust_remote_code=True` to "
     "remove this error.",
     "program.exception"),
]
LINES += PHASE_N

# Phase O (issue #34, from batch 18's misses, after it was measured): the wordings of the
# texts those logs hold, as their sources print them (each failed on dcb097d: no finding)
PHASE_O = [
    ("torch 1.x torch.distributed.launch, argparse's type=int refusal of an empty value",
     "launch.py: error: argument --nproc_per_node: invalid int value: ''",
     "launch.nproc_per_node_invalid"),
    ("torch 1.x torch.distributed.launch, argparse's refusal of a word",
     "usage: launch.py [-h] [--nnodes NNODES] [--node_rank NODE_RANK]\n"
     "launch.py: error: argument --nproc_per_node: invalid int value: 'all'",
     "launch.nproc_per_node_invalid"),
    ("torch 2.13.0 torch/serialization.py, a GPU index this process does not have",
     "RuntimeError: Attempting to deserialize object on CUDA device 2 but "
     "torch.cuda.device_count() is 1. Please use torch.load with map_location to map your "
     "storages to an existing device.",
     "checkpoint.device_missing"),
    ("torch 2.13.0 torch/serialization.py, no GPU at all",
     "RuntimeError: Attempting to deserialize object on a CUDA device but "
     "torch.cuda.is_available() is False. If you are running on a CPU-only machine, please "
     "use torch.load with map_location=torch.device('cpu') to map your storages to the CPU.",
     "checkpoint.device_missing"),
    ("CPython os.environ's KeyError of a task's variable, outside srun",
     _tb(("/home/u/train.py", 12, "<module>", "rank = int(os.environ['SLURM_PROCID'])"),
         ("/usr/lib/python3.10/os.py", 680, "__getitem__",
          "raise KeyError(key) from None"))
     + "KeyError: 'SLURM_PROCID'",
     "launch.slurm_variable_missing"),
    ("a framework's own check of a Slurm variable (itwinai), under Hydra",
     "Error in call to target 'pkg.Trainer':\n"
     "KeyError(\"Required environment variable 'SLURM_NTASKS' not set\")",
     "launch.slurm_variable_missing"),
]
LINES += PHASE_O

# Phase P (issue #34, from batch 19's misses, after it was measured)
DS_MINOR = ("Installed CUDA version 11.2 does not match the version torch was compiled with "
            "11.7 but since the APIs are compatible, accepting this combination\n")
PHASE_P = [
    ("gloo tcp/device.cc lookupAddrForIface, the enforce's check wrapped below its location",
     "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:84]\n"
     "  ifa != nullptr. Unable to find address for: ^lo",
     "gloo.socket_interface"),
    ("gloo tcp/device.cc lookupAddrForHostname, wrapped the same way",
     "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:88]\n"
     "    rp != nullptr. Unable to find address for: node-7",
     "rendezvous.hostname"),
    ("DeepSpeed op_builder/builder.py's accepted minor mismatch, then ninja's failed build",
     DS_MINOR + "Using /root/.cache/torch_extensions/py38_cu117 as PyTorch extensions root...\n"
     "[1/3] /usr/local/cuda/bin/nvcc -c custom_cuda_kernel.cu -o custom_cuda_kernel.cuda.o\n"
     "FAILED: custom_cuda_kernel.cuda.o\n"
     "ninja: build stopped: subcommand failed.",
     "extension.cuda_mismatch"),
    ("torch 2.13.0 cpp_extension's minor-version warning, then the compiler's missing header",
     "UserWarning: The detected CUDA version (12.2) has a minor version mismatch with the "
     "version that was used to compile PyTorch (12.4). Most likely this shouldn't be a "
     "problem.\n  warnings.warn(CUDA_MISMATCH_WARN.format(cuda_str_version, "
     "torch.version.cuda))\n"
     "/opt/ext/csrc/kernel.cu:3:10: fatal error: cusparse.h: No such file or directory",
     "extension.cuda_mismatch"),
]
LINES += PHASE_P

# Phase Q (issue #34, from batch 20's misses, after it was measured)
PHASE_Q = [
    ("CuPy nccl.pyx NcclError (NCCL 2's codes), vLLM's CuPy communicator",
     "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system "
     "error (run with NCCL_DEBUG=INFO for details)",
     "nccl.system_error"),
    ("CuPy nccl.pyx NcclError, a CUDA call NCCL made",
     "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled "
     "cuda error",
     "nccl.cuda_error"),
    ("CuPy nccl.pyx NcclError, invalid usage",
     "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_INVALID_USAGE: invalid usage",
     "nccl.invalid_usage"),
    ("transformers integrations/deepspeed.py deepspeed_load_checkpoint, no global_step*",
     _tb(OWN_M, (LIB311 + "transformers/trainer.py", 2119, "_inner_training_loop",
                 "deepspeed_load_checkpoint("),
         (LIB311 + "transformers/integrations/deepspeed.py", 442, "deepspeed_load_checkpoint",
          'raise ValueError(f"Can\'t find a valid checkpoint at {checkpoint_path}")'))
     + "ValueError: Can't find a valid checkpoint at /ckpt/checkpoint-125",
     "checkpoint.resume_incomplete"),
    ("transformers integrations/deepspeed.py, DeepSpeed's load found nothing",
     "ValueError: [deepspeed] failed to resume from checkpoint /ckpt/checkpoint-5439",
     "checkpoint.resume_incomplete"),
]
LINES += PHASE_Q

# Phase R (issue #34, from batch 21's misses, after it was measured)
PY310 = "/usr/lib/python3.10/multiprocessing/"
PHASE_R = [
    ("CPython 3.10 multiprocessing/synchronize.py SemLock, a DataLoader's queue lock",
     _tb(OWN_M, (PY310 + "context.py", 68, "Lock", "return Lock(ctx=self.get_context())"),
         (PY310 + "synchronize.py", 162, "__init__",
          "SemLock.__init__(self, SEMAPHORE, 1, 1, ctx=ctx)"),
         (PY310 + "synchronize.py", 57, "__init__",
          "sl = self._semlock = _multiprocessing.SemLock("))
     + "OSError: [Errno 28] No space left on device",
     "host.shm_full"),
    ("CPython 3.11 multiprocessing/synchronize.py SemLock, under torchrun's rank prefix",
     "[rank1]:   File \"/usr/lib/python3.11/multiprocessing/synchronize.py\", line 57, in "
     "__init__\n[rank1]:     sl = self._semlock = _multiprocessing.SemLock(\n"
     "[rank1]: OSError: [Errno 28] No space left on device",
     "host.shm_full"),
]
LINES += PHASE_R

# Phase U (issue #34, from batch 24's misses, after it was measured): NCCL's own connect
# to a loopback address (src/misc/socket.cc socketStartConnect 'Connect to %s failed :
# %s', the address as ncclSocketToString prints it, HOST<PORT>; NCCL 2.30's
# src/os/linux.cc 'FUNC: connect to ADDR failed'), alone: no INFO line, no other error
PHASE_U = [
    ("nccl socket.cc socketStartConnect to 127.0.0.1",
     "h1:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 127.0.0.1<45069>"
     " failed : Software caused connection abort", "nccl.socket_interface"),
    ("nccl socket.cc socketStartConnect to 127.0.1.1 (a host name's Debian address)",
     "NCCL WARN socketStartConnect: Connect to 127.0.1.1<52311> failed : Connection refused",
     "nccl.socket_interface"),
    ("nccl socket.cc socketStartConnect to ::1",
     "NCCL WARN socketStartConnect: Connect to ::1<40123> failed : Connection refused",
     "nccl.socket_interface"),
    ("nccl 2.30 linux.cc connect to 127.0.0.1",
     "h1:1:2 [0] NCCL WARN ncclOsSocketConnect: connect to 127.0.0.1<39017> failed : "
     "Connection refused", "nccl.socket_interface"),
    ("torch's 'Last error:' repeat of NCCL's loopback connect, on one line as pasted",
     "10: torch.distributed.DistBackendError: NCCL error in: /opt/conda/conda-bld/pytorch/work/"
     "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, unhandled system error (run "
     "with NCCL_DEBUG=INFO for details), NCCL version 2.18.5 10: Last error: 10: "
     "socketStartConnect: Connect to 127.0.0.1<45069> failed : Connection refused",
     "nccl.socket_interface"),
]
LINES += PHASE_U

# Phase Z (after batch 30 and the H100 run, issue #34): OpenMMLab's results collected
# through files (mmengine/dist/dist.py collect_results_cpu; mmcv 1.x engine/test.py), and
# NCCL 2.28's words for a network NCCL_NET asked for that did not start (made on the H100)
PHASE_Z = [
    ("mmengine 0.7.3 collect_results_cpu's own refusal",
     "FileNotFoundError: .dist_test/tmpq1w2e3r4 is not an shared directory for rank 3, please "
     "make sure .dist_test/tmpq1w2e3r4 is a shared directory for all ranks!",
     "host.results_dir_not_shared"),
    ("a later mmengine's wording of it",
     "FileNotFoundError: /work/.dist_test/tmpab12 is not a shared directory for rank 1, please "
     "make sure /work/.dist_test/tmpab12 is shared across all ranks!",
     "host.results_dir_not_shared"),
    ("mmengine before 0.7.3: open() of a part rank 0 cannot see",
     "FileNotFoundError: [Errno 2] No such file or directory: '.dist_test/tmpq1w2e3r4/"
     "part_1.pkl'", "host.results_dir_not_shared"),
    ("NCCL 2.28 ncclInvalidUsage's last error, NCCL_NET naming no network that started",
     "[rank0]: Failed to initialize any NET plugin", "nccl.net_not_found"),
]
LINES += PHASE_Z

# Phase AA (after batch 32: Megatron-style stacks, PyTorch on AMD GPUs): ROCm's words for
# no GPU, TransformerEngine's refusal of CUDA Multicast (its JAX wording), torch's MPI
# backend given a GPU tensor, slurmstepd's exec of a command the node lacks, srun's step
# that did not launch
PHASE_AA = [
    ("torch's ROCm build (c10's hipified 'No CUDA GPUs are available')",
     "RuntimeError: No HIP GPUs are available", "device.no_gpu"),
    ("TransformerEngine's JAX initialize: 'Launch with', not 'Launch app with'",
     "AssertionError: CUDA device, driver and/or toolkit version does not support "
     "comm+GEMM overlap with CUDA Multicast. Launch with UB_SKIPMC=1 to try CUDA IPC "
     "instead.", "cuda.multicast_unsupported"),
    ("ProcessGroupMPI.cpp's check of a CUDA tensor",
     "RuntimeError: CUDA tensor detected and the MPI used doesn't have CUDA-aware MPI "
     "support", "env.mpi_not_cuda_aware"),
    ("slurmstepd's execve of srun's command",
     "slurmstepd: error: execve(): python3: No such file or directory",
     "host.command_missing"),
    ("srun's step that did not launch (Slurm 20.11 on: %ps)",
     "srun: StepId=4242.0 aborted before step completely launched.",
     "launch.slurm_step_launch"),
]
LINES += PHASE_AA

# Phase AB (after batch 33): Unsloth's refusal of several GPUs in both of its wordings
# (models/llama.py, tokenizer_utils.py), TransformerEngine 1.x's multicast failure
PHASE_AB = [
    ("unsloth models/llama.py",
     "RuntimeError: Unsloth currently does not work on multi GPU setups - sadly we are a 2 "
     "brother team so enabling it will require much more work, so we have to prioritize.",
     "env.library_single_gpu"),
    ("unsloth tokenizer_utils.py",
     "RuntimeError: Unsloth currently does not support multi GPU setups",
     "env.library_single_gpu"),
    ("TransformerEngine 1.x userbuffers-host.cpp, the multicast calls",
     "RuntimeError: /opt/TransformerEngine/transformer_engine/pytorch/csrc/userbuffers/"
     "userbuffers-host.cpp:208 in function create_communicator_grouped2: CUDA Error: "
     "operation not supported", "cuda.multicast_unsupported"),
    # after batch 34: a Ray worker's report of torch's refusal, and vLLM's CuMem message
    # quoted without its line number
    ("a Ray worker's 'Error in F: ' before torch's pidfd_getfd refusal",
     "(VllmGenerationWorker pid=36530) Error in VllmInternalWorkerExtension."
     "update_weights_from_ipc_handles: pidfd_getfd: Operation not permitted",
     "cuda.ipc_expandable_segments"),
    ("vLLM csrc/cumem_allocator.cpp CUDA_CHECK, quoted without the line",
     "CUDA Error: out of memory at csrc/cumem_allocator.cpp", "cuda.out_of_memory"),
]
LINES += PHASE_AB

# Phase AC (after batch 35): read in a traceback only (tests/test_explain_missing_module.py).
# Phase AD (after batch 37): FSDP's refusals, as torch 2.13.0's source words them
PHASE_AD = [
    ("torch/distributed/fsdp/_state_dict_utils.py _local_pre_state_dict_hook",
     "RuntimeError: ``local_state_dict`` can only be used when parameters are flatten and "
     "sharded.", "torch.fsdp_state_dict_unsharded"),
    ("torch/distributed/fsdp/_state_dict_utils.py _sharded_pre_state_dict_hook",
     "RuntimeError: ``sharded_state_dict`` can only be used when parameters are flatten "
     "and sharded.", "torch.fsdp_state_dict_unsharded"),
    ("torch/distributed/fsdp/_flat_param.py _validate_tensors_to_flatten, float16",
     "ValueError: Must flatten tensors with uniform dtype but got torch.float16 and "
     "torch.float32", "torch.fsdp_mixed_dtype"),
    ("torch 1.13 torch/distributed/fsdp/flat_param.py FlatParamHandle._init_flat_param",
     "ValueError: `FlatParameter` requires uniform dtype but got torch.float32 and "
     "torch.bfloat16", "torch.fsdp_mixed_dtype"),
]
LINES += PHASE_AD

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


def test_torch_loopback_fallback_alone_is_no_cause(tmp_path, matrix):
    """torch prints the loopback warning on every job whose host name does not resolve;
    one node's job works with it. Only a failed connect or a gloo timeout makes it a
    cause."""
    found, result = _first("[W ProcessGroupGloo.cpp:684] Warning: Unable to resolve hostname to "
                           "a (local) address. Using the loopback address as fallback. Manually "
                           "set the network interface to bind to with GLOO_SOCKET_IFNAME. "
                           "(function operator())\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_a_missing_name_of_torch_distributed_that_is_not_c10d_s_is_the_program(tmp_path, matrix):
    """Only the names distributed_c10d has defined in every release say the build lacks
    distributed; any other is the program's (or a version's)."""
    found, result = _first('Traceback (most recent call last):\n  File "train.py", line 9, in '
                           "<module>\n    dist.tensor.foo()\nAttributeError: module "
                           "'torch.distributed' has no attribute 'tensor'\n", tmp_path, matrix)
    assert found == ["program.exception"]


def test_nccl_bootstrap_trace_alone_is_no_cause(tmp_path, matrix):
    """NCCL's INFO trace through bootstrap.cc names a stray connection only with the closed
    connection or NCCL's error that it led to."""
    found, result = _first("h1:1:2 [0] NCCL INFO bootstrap.cc:701 -> 6\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


USER_ERROR = ('Traceback (most recent call last):\n'
              '  File "/home/u/train.py", line 12, in <module>\n'
              '    main()\n'
              'ValueError: bad config\n')


def test_a_guess_from_nccl_info_lines_says_so(tmp_path, matrix):
    """NCCL's INFO lines name a cause only where the log shows nothing else, and the
    finding says how sure it is (phase D)."""
    for text, expect, word in (
            ("h1:1:2 [0] NCCL INFO misc/socket.cc:567 -> 2\n"
             "h1:1:2 [0] NCCL INFO bootstrap.cc:270 -> 2\n", "network.peer_connect", "likely"),
            ("h1:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n",
             "nccl.p2p_hang", "possibly")):
        found, result = _first(text, tmp_path, matrix)
        assert found == [expect]
        assert result.findings[0].alone and result.findings[0].cause.startswith(word)
        assert int(result.exit_code) == 0


def test_nccl_info_lines_never_stand_before_the_program_s_error(tmp_path, matrix):
    for info in ("h1:1:2 [0] NCCL INFO misc/socket.cc:567 -> 2\n",
                 "h1:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n",
                 "h1:1:2 [0] NCCL INFO Setting affinity for GPU 1 to ff00ff\n"):
        found, _ = _first(info + USER_ERROR, tmp_path, matrix)
        assert found == ["program.exception"], info


def test_nccl_info_lines_come_after_a_cause_a_line_states(tmp_path, matrix):
    found, result = _first("h1:1:2 [0] NCCL INFO misc/socket.cc:567 -> 2\n"
                           "h1:1:2 [0] NCCL WARN Error while creating shared memory segment "
                           "/dev/shm/nccl-x (size 5767520)\n", tmp_path, matrix)
    assert found == ["nccl.shm_full"] and not result.findings[0].alone


def test_a_p2p_line_with_a_timeout_is_said_without_a_doubt(tmp_path, matrix):
    found, result = _first(
        "h1:1:2 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC\n"
        "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out.\n", tmp_path, matrix)
    assert found == ["nccl.p2p_hang"] and not result.findings[0].alone


def test_an_alone_cause_must_say_how_sure_it_is():
    from envcheck.matrix import signatures

    class Errors(list):
        def add(self, where, text):
            self.append(text)

    errors = Errors()
    signatures.parse(errors, "x.toml", {
        "id": "x.guess", "cause": "c", "source": "s", "advice": "a",
        "match": ["NCCL WARN x"], "alone_match": ["NCCL INFO y"],
        "alone_cause": "a rank could not connect"}, {}, lambda *a: ())
    assert any("how sure" in e for e in errors)


TIME_LIMIT = ("slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2025-01-02T03:04:05 DUE TO "
              "TIME LIMIT ***\n")


def test_nccl_s_missing_network_leads_the_invalid_usage_it_returns(tmp_path, matrix):
    """NCCL's net.cc returns ncclInvalidUsage after 'Error: network X not found.'"""
    found, _ = _first("h1:1:2 [1] net.cc:626 NCCL WARN Error: network AWS Libfabric not found.\n"
                      "h1: Test NCCL failure common.cu:958 'invalid usage (run with "
                      "NCCL_DEBUG=WARN for details)\n", tmp_path, matrix)
    assert found == ["nccl.net_not_found"]


def test_slurm_s_time_limit_comes_after_the_program_s_error(tmp_path, matrix):
    """A rank that raised leaves the others waiting until Slurm's limit: the program's
    error is the cause, the time limit its consequence."""
    text = ('[rank1]: Traceback (most recent call last):\n'
            '[rank1]:   File "/home/u/train.py", line 12, in main\n'
            '[rank1]:     raise ValueError("bad config value: lr")\n'
            '[rank1]: ValueError: bad config value: lr\n' + TIME_LIMIT)
    found, result = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]
    assert "launch.time_limit" in [f.signature.id for f in result.consequences]


def test_slurm_s_time_limit_explains_the_sigkill_it_sent(tmp_path, matrix):
    found, result = _first(TIME_LIMIT + "/var/spool/slurmd/job1/slurm_script: line 22: 443552 "
                           "Killed                  python main.py\n", tmp_path, matrix)
    assert found == ["launch.time_limit"]
    assert "launch.rank_killed" in [f.signature.id for f in result.consequences]


def test_a_watchdog_timeout_before_slurm_s_time_limit_leads(tmp_path, matrix):
    found, _ = _first("[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective "
                      "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, "
                      "NumelOut=1, Timeout(ms)=1800000) ran for 1800096 milliseconds before "
                      "timing out.\n" + TIME_LIMIT, tmp_path, matrix)
    assert found == ["nccl.watchdog_timeout"]


def test_slurm_s_preemption_explains_the_sigkill_and_follows_the_program_s_error(tmp_path, matrix):
    preempted = TIME_LIMIT.replace("TIME LIMIT", "PREEMPTION")
    found, result = _first(preempted + "Killed\n", tmp_path, matrix)
    assert found == ["launch.preempted"]
    assert "launch.rank_killed" in [f.signature.id for f in result.consequences]
    found, _ = _first('[rank0]: Traceback (most recent call last):\n'
                      '[rank0]:   File "/home/u/train.py", line 9, in main\n'
                      '[rank0]:     open("/data/labels.txt")\n'
                      "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: "
                      "'/data/labels.txt'\n" + preempted, tmp_path, matrix)
    assert found == ["program.exception"]


# Phase F guards: texts that look like the new signatures' but are the program's own
# error (or a working job's) get no environment cause


@pytest.mark.parametrize("text", [
    # the same TypeError without Lightning's line: the program's
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 7, in <module>\n'
    "    hosts = sorted(set(all_hosts))\nTypeError: 'NoneType' object is not iterable\n",
    # a source line reading LOCAL_RANK whose exception line says what failed there
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 5, in <module>\n'
    '    local_rank = int(os.environ["LOCAL_RANK"])\n'
    "ValueError: invalid literal for int() with base 10: ''\n",
    # the program's own file, not /dev/shm
    "PermissionError: [Errno 13] Permission denied: '/data/out/ckpt-100.pt'\n",
    # the program's own check of a port
    "ValueError: The port number must be an integer between 0 and 65535, got 'auto'\n",
    # ATen's device check reads like DDP's 'Expected to ...', and is the program's
    "RuntimeError: Expected all tensors to be on the same device, but found at least two "
    "devices, cuda:0 and cpu!\n",
], ids=["typeerror", "local-rank-value", "permission", "port", "devices"])
def test_texts_close_to_phase_f_s_are_the_program_s_error(text, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]


def test_a_source_line_reading_local_rank_is_no_guess_beside_an_exception_line(tmp_path, matrix):
    """An exception line that names the environment in words no signature reads is what
    the log states: the guess from the source line above it stands back."""
    found, result = _first('Traceback (most recent call last):\n'
                           '  File "/home/u/train.py", line 5, in <module>\n'
                           '    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n'
                           "RuntimeError: CUDA error: unknown error\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_lightning_s_fixed_line_is_not_its_bug(tmp_path, matrix):
    """Lightning 2.1.3 checks for None on the same line (#19074)."""
    found, result = _first("[rank1]:     unique_hosts = sorted(set(all_hostnames)) if "
                           "all_hostnames is not None else []\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1
    found, _ = _first("[rank1]:     unique_hosts = sorted(set(all_hostnames))\n", tmp_path, matrix)
    assert found == ["launch.lightning_mpi_environment"]


def test_nccl_s_info_line_going_on_without_nvls_is_no_cause(tmp_path, matrix):
    """NCCL 2.27-2.28 print the bind failure as INFO and go on without NVLS."""
    found, result = _first("h1:1:2 [0] NCCL INFO Failed to bind NVLink SHARP (NVLS) Multicast "
                           "memory of size 2097152 : CUDA error 401 'the operation cannot be "
                           "performed in the present state'. Proceeding without NVLS support.\n",
                           tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_a_full_dev_shm_in_nccl_2_23_s_wording_stays_full(tmp_path, matrix):
    found, _ = _first("h1:1:2 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared "
                      "memory segment /dev/shm/nccl-Ab12Cd (size 9637888), error: No space left "
                      "on device (28)\n", tmp_path, matrix)
    assert found == ["nccl.shm_full"]


def test_nccl_s_permission_explains_the_segment_it_could_not_create(tmp_path, matrix):
    """pytorch/pytorch#37004's order: the shm_open refused, then the segment."""
    found, result = _first("n1:1:2 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : "
                           "Permission denied\nn1:1:2 [0] include/shm.h:48 NCCL WARN Error while "
                           "creating shared memory segment nccl-shm-recv-b79-0-3-0 (size "
                           "4460544)\n", tmp_path, matrix)
    assert found == ["nccl.shm_permission"]
    assert [f.signature.id for f in result.consequences] == ["nccl.shm_full"]


# Phase G guards: close texts that are the program's own error, or a bus error whose
# report does not say whose memory it was


def test_the_words_bus_error_in_a_program_s_message_are_its_own(tmp_path, matrix):
    found, _ = _first("ValueError: CAN Bus error counter out of range: 300\n", tmp_path, matrix)
    assert found == ["program.exception"]


def test_a_bus_error_whose_frames_are_not_nccl_s_is_a_plain_sigbus(tmp_path, matrix):
    """Without NCCL's frames the report does not say whose memory it was."""
    found, result = _first(
        "[node1:21707:0:21707] Caught signal 7 (Bus error: nonexistent physical address)\n"
        "==== backtrace (tid:  21707) ====\n"
        " 0 0x000000000018bb41 __memmove_avx_unaligned_erms()  ???:0\n"
        " 1 0x0000000000d1a2b3 at::native::copy_()  ???:0\n"
        "=================================\n", tmp_path, matrix)
    assert found == ["launch.rank_bus_error"]
    assert "this line does not say whose memory" in result.findings[0].cause


def test_a_ucx_report_reads_only_its_own_thread_s_frames(tmp_path, matrix):
    """Two ranks' reports, their lines and other ranks' interleaved (DeepSpeed#2638's
    shape): each header reads the block of its own thread id."""
    text = ("[h:100:0:201] Caught signal 7 (Bus error: nonexistent physical address)\n"
            "h:101:301 [1] NCCL INFO Connected all trees\n"
            "[h:101:0:202] Caught signal 7 (Bus error: nonexistent physical address)\n"
            "==== backtrace (tid:    202) ====\n"
            " 0 0x000000000007587d ncclGroupEnd()  ???:0\n"
            "=================================\n"
            "==== backtrace (tid:    201) ====\n"
            " 0 0x000000000018bb41 __memmove_avx_unaligned_erms()  ???:0\n"
            "=================================\n")
    found, result = _first(text, tmp_path, matrix)
    assert found == ["nccl.shm_full"]
    assert result.findings[0].line.number == 3
    assert result.findings[0].line.shown.endswith("nonexistent physical address)")


def test_nccl_s_bus_error_explains_torchrun_s_sigbus(tmp_path, matrix):
    found, result = _first(UCX_NCCL + "\n"
                           "  traceback : Signal 7 (SIGBUS) received by PID 21707\n",
                           tmp_path, matrix)
    assert found == ["nccl.shm_full"]
    assert "launch.rank_bus_error" in [f.signature.id for f in result.consequences]


def test_a_dataloader_worker_s_bus_error_stays_the_dataloader_s(tmp_path, matrix):
    found, _ = _first("ERROR: Unexpected bus error encountered in worker. This might be caused "
                      "by insufficient shared memory (shm).\n", tmp_path, matrix)
    assert found == ["dataloader.shm"]


@pytest.mark.parametrize("text", [
    # an abstract method the job did not implement
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 30, in <module>\n'
    "    model.step()\n  File \"/home/u/model.py\", line 12, in step\n"
    "    raise NotImplementedError\nNotImplementedError\n",
    # a framework's or the job's own refusal, worded like torch's
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 30, in <module>\n'
    "    build(cfg)\nNotImplementedError: pipeline parallel with MoE is not supported yet\n",
    # torch's refusal of an argument, in every release since: the program's choice (FSDP's
    # offload_to_cpu=True with NO_SHARD has its own signature since phase H, for the one
    # cause it has: torch.fsdp_no_shard_offload)
    "NotImplementedError: writeback=True and rank0_only=True is not supported yet\n",
], ids=["abstract", "framework-not-yet", "torch-argument"])
def test_a_refusal_no_torch_release_lifted_is_the_program_s_error(text, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]


@pytest.mark.parametrize("text", [
    # the job's own override of another key, refused by HyperPyYAML
    "KeyError: \"Override 'lr_rate' not found in: ['seed', 'lr', 'output_folder']\"\n",
    # the job's own dict read of a key named local_rank
    'Traceback (most recent call last):\n  File "/home/u/demo.py", line 9, in <module>\n'
    "    device = kwargs['local_rank']\nKeyError: 'local_rank'\n",
], ids=["override-other-key", "user-dict-key"])
def test_a_key_error_that_is_not_the_launcher_s_argument_is_the_program_s(text, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]


@pytest.mark.parametrize("text", [
    "Could not override 'lr'.\nTo append to your config use +lr=0.1\n",
    "Error: No such option: --lr\n",
    "train.py: error: unrecognized arguments: --lr=0.1\n",
    "FATAL Flags parsing error: Unknown command line flag 'lr'\n",
    "ERROR: Could not consume arg: --lr=0.1\n",
], ids=["hydra", "click", "argparse", "absl", "fire"])
def test_a_parser_refusing_another_argument_is_no_environment_cause(text, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


# Phase H guards: close texts that are the program's own error, or no cause at all


@pytest.mark.parametrize("text", [
    # the job's own script refusing torchrun's option, written after the script's name
    "train.py: error: unrecognized arguments: --nproc_per_node=2\n",
    # torchrun refusing an option that no release of it has (a typo)
    "torchrun: error: unrecognized arguments: --nproc_per_gpu=2\n",
    # a script refusing torchrun's --local_ranks_filter is not the launcher's --local-rank
    "train.py: error: unrecognized arguments: --local_ranks_filter=0\n",
    # a program's own message that begins like DDP's list
    "Parameters which were frozen: 12 of 340\n",
], ids=["script-refuses-launcher-option", "torchrun-typo", "script-local-ranks-filter",
        "program-message"])
def test_texts_close_to_phase_h_s_are_no_environment_cause(text, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


@pytest.mark.parametrize("text", [
    # FSDP's other refusals of an argument, in _unshard_param_utils.py
    "NotImplementedError: with_grads=True, use_orig_params=False, offload_to_cpu=False is "
    "not supported yet\n",
    "NotImplementedError: writeback=True and rank0_only=True is not supported yet\n",
    # a program's own error that names DDP's parameter indices
    "ValueError: Parameter indices out of range: 12\n",
], ids=["fsdp-with-grads", "fsdp-writeback", "parameter-indices"])
def test_other_refusals_close_to_phase_h_s_are_the_program_s(text, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]


def test_a_cpp_error_s_place_in_torch_s_source_names_no_part_of_the_environment(tmp_path, matrix):
    """The path of c10::Error's place (c10d/, cuda/) is left out before the message is
    judged; the message's own words still name the environment."""
    found, result = _first("RuntimeError: CUDA error: unknown error (launch_kernel at "
                           "/pytorch/aten/src/ATen/native/cuda/Loops.cuh:103)\n"
                           "frame #0: c10::Error::Error(c10::SourceLocation, std::string "
                           "const&) + 0x33 (0x7f2b in /usr/lib/libc10.so)\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1
    found, _ = _first("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp"
                      ":514, unhandled system error, NCCL version 2.7.8 (operator() at "
                      "/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:514)\n", tmp_path, matrix)
    assert found == ["nccl.system_error"]


def test_fsdp_s_no_shard_offload_says_the_world_size_of_one(tmp_path, matrix):
    found, result = _first("UserWarning: FSDP is switching to use `NO_SHARD` instead of "
                           "ShardingStrategy.FULL_SHARD since the world size is 1.\n"
                           "NotImplementedError: offload_to_cpu=True and NO_SHARD is not "
                           "supported yet\n", tmp_path, matrix)
    assert found == ["torch.fsdp_no_shard_offload"]
    assert "world size is 1" in result.findings[0].cause
    assert "accelerate" in dict(result.findings[0].signature.framework_advice)


# Phase I guards: the watchdog's timeouts that do not show ranks out of step stay the
# timeout; FSDP's other refusals and a program's FileNotFoundError stay the program's


@pytest.mark.parametrize("text,expect", [
    # every rank timed out at the same SeqNum on the same operation: some rank never came
    (W113.format(r=0, n=120, op="ALLREDUCE", shape="4096")
     + W113.format(r=1, n=120, op="ALLREDUCE", shape="4096"), "nccl.watchdog_timeout"),
    # one rank's two works (its lines only): nothing to compare
    (W113.format(r=0, n=120, op="ALLREDUCE", shape="4096")
     + W113.format(r=0, n=121, op="ALLREDUCE", shape="4096"), "nccl.watchdog_timeout"),
    # lines whose rank the log does not say
    (W113.format(r=0, n=120, op="ALLREDUCE", shape="1").replace("[Rank 0] ", "")
     + W113.format(r=1, n=121, op="ALLREDUCE", shape="1").replace("[Rank 1] ", ""),
     "nccl.watchdog_timeout"),
    # two process groups count apart
    (W214.format(r=0, pg=0, desc="default_pg", n=7, op="ALLREDUCE")
     + W214.format(r=1, pg=1, desc="undefined", n=3, op="ALLREDUCE"), "nccl.watchdog_timeout"),
    # point-to-point operations: their counts differ between ranks by design
    (W214.format(r=0, pg=0, desc="default_pg", n=5, op="SEND")
     + W214.format(r=1, pg=0, desc="default_pg", n=3, op="RECV"), "nccl.watchdog_timeout"),
], ids=["same-seqnum", "one-rank", "no-rank", "two-groups", "send-recv"])
def test_watchdog_timeouts_not_out_of_step_stay_the_timeout(text, expect, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found[:1] == [expect]


@pytest.mark.parametrize("text", [
    # (FSDP's refusal of a module of two dtypes, the program's since phase I, is
    # torch.fsdp_mixed_dtype since phase AD: PHASE_AD)
    # transformers' checkpoint rotation racing on a shared filesystem, without its frames:
    # the program's FileNotFoundError, no environment cause (docs/explain.md, phase I)
    "FileNotFoundError: [Errno 2] No such file or directory: 'rng_state_1.pth'\n",
], ids=["checkpoint-rotation"])
def test_texts_close_to_phase_i_s_are_the_program_s(text, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]


def test_deepspeed_s_return_code_2_alone_is_no_cause(tmp_path, matrix):
    """argparse exits with 2, and so does Python that cannot open the script, and any
    sys.exit(2): the launcher's summary alone names no cause (BAAI-DCAI/Bunny#46)."""
    found, result = _first("[2024-04-19 16:07:06,861] [ERROR] [launch.py:322:sigkill_handler] "
                           "['/usr/bin/python3', '-u', 'train.py', '--local_rank=7'] exits with "
                           "return code = 2\n", tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


# Phase J guards: a program's own import, library or build stays the program's (or no
# cause); lines every working job prints, and the warnings of a build that goes on, are
# no cause


@pytest.mark.parametrize("text,kind", [
    # a name the job's own module lacks: CPython names the module's file, outside
    # site-packages
    ('Traceback (most recent call last):\n  File "/home/u/train.py", line 3, in <module>\n'
     "    from mypkg import build_model\n"
     "ImportError: cannot import name 'build_model' from 'mypkg' (/home/u/mypkg/__init__.py)\n",
     "ImportError"),
    ("[rank2]: ImportError: cannot import name 'Config' from 'utils.config' "
     "(/workspace/proj/utils/config.py)\n", "ImportError"),
    # the job's own library, by ctypes, not on the loader's path: not a CUDA library
    ("OSError: libmylib.so: cannot open shared object file: No such file or directory\n",
     "OSError"),
], ids=["own-module", "own-module-rank", "own-library"])
def test_an_import_of_the_job_s_own_module_is_the_program_s(text, kind, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]
    assert result.findings[0].exception.type == kind


@pytest.mark.parametrize("text", [
    # whose module it is, the text does not say (a package not installed, or the job's
    # own module not on sys.path): no cause, never an environment one
    "ModuleNotFoundError: No module named 'mymodule'\n",
    # a library's name missing from an installed package: another release of it
    "ImportError: cannot import name 'foo' from 'transformers' (/opt/conda/lib/python3.10/"
    "site-packages/transformers/__init__.py)\n",
    # the job's own extension missing its own function (a build without that source file)
    "ImportError: /home/u/proj/ops/_ext.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
    "_Z9my_kernelPf\n",
    # torch's own library missing another name (MKL 2024.1's iJIT_NotifyEvent, c10 of two
    # torch installs mixed): no signature reads it
    "ImportError: /opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so: "
    "undefined symbol: iJIT_NotifyEvent\n",
    "ImportError: /usr/lib/python3.8/site-packages/torch/lib/libtorch_python.so: undefined "
    "symbol: _ZN5torch4cuda4nccl6detail16throw_nccl_errorE12ncclResult_t\n",
    # NCCL without a network plugin: an INFO line of every such job
    "h1:16674:16674 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : "
    "libnccl-net.so: cannot open shared object file: No such file or directory\n",
    # TensorFlow's warning where it is imported beside torch
    "2023-05-01 10:00:00.000000: W tensorflow/compiler/xla/stream_executor/platform/default/"
    "dso_loader.cc:64] Could not load dynamic library 'libcudart.so.11.0'; dlerror: "
    "libcudart.so.11.0: cannot open shared object file: No such file or directory\n",
    # the builds that go on: torch's and DeepSpeed's minor-release warnings
    "UserWarning: The detected CUDA version (12.2) has a minor version mismatch with the "
    "version that was used to compile PyTorch (12.1). Most likely this shouldn't be a "
    "problem.\n",
    "Installed CUDA version 11.8 does not match the version torch was compiled with 11.7 but "
    "since the APIs are compatible, accepting this combination\n",
    # accelerate's driver warning for device_map inference: the run goes on
    "We've detected an older driver with an RTX 4000 series GPU. These drivers have issues "
    "with P2P. This can affect the multi-gpu inference when using accelerate device_map.\n",
], ids=["no-module", "package-name", "own-extension", "torch-ijit",
        "torch-own-c10", "nccl-net-plugin", "tensorflow-warning", "torch-minor-cuda",
        "deepspeed-minor-cuda", "accelerate-driver-warning"])
def test_texts_close_to_phase_j_s_are_no_environment_cause(text, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_torch_1_x_s_cuda_mismatch_is_one_failure_not_the_program_s(tmp_path, matrix):
    """RuntimeError('\\nThe detected CUDA version ...') prints 'RuntimeError: ' alone: the
    lines below are its message, not a second failure; a bare RuntimeError followed by
    another text stays the program's."""
    found, _ = _first("RuntimeError: \nThe detected CUDA version (12.4) mismatches the version "
                      "that was used to compile\nPyTorch (11.8). Please make sure to use the "
                      "same CUDA versions.\n", tmp_path, matrix)
    assert found == ["extension.cuda_mismatch"]
    found, _ = _first("RuntimeError: \nthe model's config has no key 'lr'\n", tmp_path, matrix)
    assert found == ["program.exception"]


def test_accelerate_s_rtx_40_refusal_says_the_driver(tmp_path, matrix):
    text = ('Traceback (most recent call last):\n  File "/home/u/train.py", line 8, in <module>\n'
            "    accelerator = Accelerator()\n"
            '  File "/opt/conda/lib/python3.10/site-packages/accelerate/state.py", line 288, in '
            "__init__\n    raise NotImplementedError(\n"
            "NotImplementedError: Using RTX 4000 series doesn't support faster communication "
            "broadband via P2P or IB. Please set `NCCL_P2P_DISABLE=\"1\"` and `NCCL_IB_DISABLE="
            "\"1\" or use `accelerate launch` which will do this automatically.\n")
    found, result = _first(text, tmp_path, matrix)
    assert found == ["cuda.p2p_unsupported"] and result.frameworks == ["accelerate"]
    assert "550.40.07" in dict(result.findings[0].signature.framework_advice)["accelerate"]


# Phase K guards: the same words in the job's own call, or where the frames cannot say
# whose function it was, stay the program's error; the same CUDA error outside NCCL is no
# cause


OWN = ("/home/u/train.py", 40, "main", "model = build(cfg)")
RUNPY = ("/usr/lib/python3.10/runpy.py", 196, "_run_module_as_main",
         "return _run_code(code, main_globals, None,")


@pytest.mark.parametrize("text,kind", [
    # the job's own call with a keyword its torch does not take: raised in its own frame
    (_tb(("/home/u/train.py", 52, "main", "model = DDP(model, static_graph=True)"))
     + "TypeError: DistributedDataParallel.__init__() got an unexpected keyword argument "
     "'static_graph'\n", "TypeError"),
    # a library calling the job's callback: the message cannot say whose function it was,
    # and the job's own code is in the traceback
    (_tb(OWN, (LIB + "transformers/trainer.py", 3150, "evaluation_loop",
               "metrics = self.compute_metrics(EvalPrediction(predictions=p, label_ids=l))"))
     + "TypeError: compute_metrics() takes 1 positional argument but 2 were given\n",
     "TypeError"),
    (_tb(OWN, (LIB + "deepspeed/runtime/engine.py", 1846, "forward",
               "loss = self.module(*inputs, **kwargs)"),
         (LIB + "torch/nn/modules/module.py", 1562, "_call_impl",
          "args_result = hook(self, args)"))
     + "TypeError: my_hook() takes 2 positional arguments but 3 were given\n", "TypeError"),
    # one package's own call (its entry point, no second package): its bug, not two
    # packages out of step
    (_tb(RUNPY, (LIB + "deepspeed/launcher/runner.py", 430, "main", "args = parse_args()"),
         (LIB + "deepspeed/launcher/runner.py", 120, "parse_args", "return parser.parse()"))
     + "TypeError: parse() missing 1 required positional argument: 'args'\n", "TypeError"),
    # two packages, but the traceback cut (no first line): the job's code may be above it
    ('  File "' + LIB + 'deepspeed/elasticity/elastic_agent.py", line 126, in _invoke_run\n'
     "    self._initialize_workers(self._worker_group)\n"
     '  File "' + LIB + 'torch/distributed/elastic/agent/server/api.py", line 556, in '
     "_rendezvous\n    self._set_master_addr_port(\n"
     "TypeError: _set_master_addr_port() takes 3 positional arguments but 4 were given\n",
     "TypeError"),
    # a library reading the job's own module (a config), and the job's own torch call
    (_tb(OWN, (LIB + "mmengine/config/config.py", 410, "_file2dict", "model = mod.model"))
     + "AttributeError: module 'configs.base' has no attribute 'model'\n", "AttributeError"),
    (_tb(("/home/u/train.py", 12, "<module>", "model = torch.distributed.fsdp.fully_shard(m)"))
     + "AttributeError: module 'torch.distributed.fsdp' has no attribute 'fully_shard'\n",
     "AttributeError"),
    # the job's own subprocess of a file path that is not there
    (_tb(OWN, ("/usr/lib/python3.10/subprocess.py", 1863, "_execute_child",
               "raise child_exception_type(errno_num, err_msg, err_filename)"))
     + "FileNotFoundError: [Errno 2] No such file or directory: './scripts/eval.sh'\n",
     "FileNotFoundError"),
    # a command line given as one string without a shell: the program's call
    (_tb(OWN, ("/usr/lib/python3.10/subprocess.py", 1863, "_execute_child",
               "raise child_exception_type(errno_num, err_msg, err_filename)"))
     + "FileNotFoundError: [Errno 2] No such file or directory: 'scontrol requeue 12'\n",
     "FileNotFoundError"),
    # the same words without subprocess's frame: a file of the working directory
    (_tb(("/home/u/train.py", 18, "load_labels", "with open(name) as f:"))
     + "FileNotFoundError: [Errno 2] No such file or directory: 'labels'\n",
     "FileNotFoundError"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'scontrol'\n",
     "FileNotFoundError"),
    # a pasted log indented by a blank before its rank prefixes (DeepSpeed#7869)
    (" [rank3]: Traceback (most recent call last):\n"
     ' [rank3]:   File "/home/u/finetune.py", line 709, in main\n'
     " [rank3]:     engine = deepspeed.initialize(model=model)\n"
     " [rank3]: ValueError: torch.cat(): expected a non-empty list of Tensors\n",
     "ValueError"),
    # FSDP's check that its parameters are on the GPU, where the program (verl's offload)
    # left them on the CPU: words that name CUDA, the program's state; a Ray worker's
    # line of another node (ip=)
    ("(WorkerDict pid=42417, ip=10.0.0.7)   File \"" + LIB + "torch/distributed/utils.py\", "
     "line 159, in _p_assert\n(WorkerDict pid=42417, ip=10.0.0.7)     raise AssertionError(s)\n"
     "(WorkerDict pid=42417, ip=10.0.0.7) AssertionError: Expects tensor to be on the compute "
     "device cuda:0, was on cpu\n", "AssertionError"),
], ids=["own-call-keyword", "library-calls-callback", "hook-under-deepspeed",
        "one-package", "cut-traceback", "own-config-module", "own-torch-attribute",
        "own-script-path", "command-as-one-string", "open-bare-name", "no-frames",
        "indented-rank-prefix", "fsdp-params-on-cpu-ray"])
def test_texts_close_to_phase_k_s_are_the_program_s(text, kind, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found[:1] == ["program.exception"], found
    assert result.findings[0].exception.type == kind


@pytest.mark.parametrize("text", [
    # cudaErrorSymbolNotFound raised by torch or the job's own CUDA code: not NCCL's look-up
    # of its own kernels (a program's symbol may be missing), and named CUDA: no cause
    "torch.AcceleratorError: CUDA error: named symbol not found\n",
    "RuntimeError: CUDA error: named symbol not found\nCUDA kernel errors might be "
    "asynchronously reported at some other API call\n",
], ids=["torch-accelerator-error", "torch-cuda-error"])
def test_texts_close_to_phase_k_s_are_no_environment_cause(text, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_nccl_s_named_symbol_explains_its_unhandled_cuda_error(tmp_path, matrix):
    found, result = _first("RuntimeError: NCCL Error 1: unhandled cuda error\n"
                           "h1:1:1 [0] NCCL WARN Cuda failure 'named symbol not found'\n",
                           tmp_path, matrix)
    assert found == ["cuda.no_kernel_image"]
    assert [f.signature.id for f in result.consequences] == ["nccl.cuda_error"]


def test_a_missing_command_is_named_with_the_call_that_ran_it(tmp_path, matrix):
    text = (_tb(OWN, ("/usr/lib/python3.10/subprocess.py", 1863, "_execute_child",
                      "raise child_exception_type(errno_num, err_msg, err_filename)"))
            + "FileNotFoundError: [Errno 2] No such file or directory: 'git'\n")
    found, result = _first(text, tmp_path, matrix)
    assert found == ["host.command_missing"]
    assert result.findings[0].cause.endswith(
        "('git' is not on PATH; run from /home/u/train.py:40, in main)")


def test_two_packages_out_of_step_are_named(tmp_path, matrix):
    text = (_tb(OWN, (LIB + "transformers/modeling_utils.py", 120, "<module>",
                      "if torch.compiler.is_compiling():"))
            + "AttributeError: module 'torch' has no attribute 'compiler'\n")
    found, result = _first(text, tmp_path, matrix)
    assert found == ["env.package_version"]
    assert "(transformers calls torch.compiler, which the installed torch lacks, at " in (
        result.findings[0].cause)


# Phase L guards: the same words raised by the job's own call, or without the frames that
# say whose call it was, stay the program's error; ordinary words are no exception


@pytest.mark.parametrize("text,kind", [
    # the job's own subprocess.run(check=True): CalledProcessError raised in subprocess.py
    (_tb(OWN, ("/usr/lib/python3.11/subprocess.py", 571, "run",
               "raise CalledProcessError(retcode, process.args,"))
     + "subprocess.CalledProcessError: Command '['python', '-u', 'eval.py', '--local_rank=0']' "
     "returned non-zero exit status 1.\n", "CalledProcessError"),
    # the job's own file named launch.py: not torch's or accelerate's launcher
    (_tb(("/home/u/tools/launch.py", 30, "main", "raise subprocess.CalledProcessError(1, cmd)"))
     + "subprocess.CalledProcessError: Command '['bash', 'prep.sh']' returned non-zero exit "
     "status 1.\n", "CalledProcessError"),
    # the launcher's summary without its frames: whose call it was is not said
    ("subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py', "
     "'--local_rank=0']' returned non-zero exit status 1.\n", "CalledProcessError"),
    # ENOMEM without the frames of a fork: an mmap or an allocation, or a cut traceback
    ("OSError: [Errno 12] Cannot allocate memory\n", "OSError"),
    (_tb(OWN, (LIB + "numpy/core/memmap.py", 267, "__new__",
               "mm = mmap.mmap(fid.fileno(), bytes, access=acc, offset=start)"))
     + "OSError: [Errno 12] Cannot allocate memory\n", "OSError"),
    # another errno where CPython forks: the program's (exec of a file that is no program)
    (_tb(OWN, ("/usr/lib/python3.11/subprocess.py", 1950, "_execute_child",
               "raise child_exception_type(errno_num, err_msg, err_filename)"))
     + "OSError: [Errno 8] Exec format error: './scripts/eval.sh'\n", "OSError"),
    # a subprocess of a file that is not there (the fork worked, the exec did not)
    (_tb(OWN, ("/usr/lib/python3.11/subprocess.py", 1950, "_execute_child",
               "raise child_exception_type(errno_num, err_msg, err_filename)"))
     + "FileNotFoundError: [Errno 2] No such file or directory: './run_eval.sh'\n",
     "FileNotFoundError"),
    # urllib's port error of the job's own URL (an IPv6 address too), and a port that is a
    # word under torch's rendezvous (init_method written wrong: not an address's rest)
    (_tb(("/home/u/serve.py", 12, "connect", "port = urlparse(url).port"),
         ("/usr/lib/python3.11/urllib/parse.py", 182, "port",
          'raise ValueError(f"Port could not be cast to integer value as {port!r}")'))
     + "ValueError: Port could not be cast to integer value as 'db8::5:8080'\n", "ValueError"),
    (_tb(OWN, (LIB + "torch/distributed/rendezvous.py", 217, "_tcp_rendezvous_handler",
               "if result.port is None:"),
         ("/usr/lib/python3.11/urllib/parse.py", 182, "port",
          'raise ValueError(f"Port could not be cast to integer value as {port!r}")'))
     + "ValueError: Port could not be cast to integer value as 'PORT'\n", "ValueError"),
    ("ValueError: Port could not be cast to integer value as 'db8::5:29500'\n", "ValueError"),
    # a zip that is not torch's, and a file that is no zip (a git-lfs pointer): not read
    ("RuntimeError: PytorchStreamReader failed locating file data.pkl: file not found\n",
     "RuntimeError"),
    ("_pickle.UnpicklingError: invalid load key, 'v'.\n", "UnpicklingError"),
    # DeepSpeed's other refusal there: a host name the hostfile does not hold
    ("ValueError: Hostname 'worker-9' not found in hostfile\n", "ValueError"),
    # NumPy's other refusals in the job's code stay the job's (a sparse tensor)
    ("TypeError: can't convert sparse tensor to numpy. Use Tensor.to_dense() to convert to "
     "a dense tensor first.\n", "TypeError"),
], ids=["own-check-call", "own-launch-py", "summary-without-frames", "enomem-bare",
        "enomem-mmap", "exec-format", "missing-script", "own-url", "word-port",
        "port-without-frames", "not-torch-zip", "lfs-pointer", "deepspeed-hostname",
        "sparse-numpy"])
def test_texts_close_to_phase_l_s_are_the_program_s(text, kind, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found[:1] == ["program.exception"], found
    assert result.findings[0].exception.type == kind


@pytest.mark.parametrize("text", [
    # a word that ends in Error glued to words, with a message-like line below it
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 9, in main\n'
    "    check(cfg)\nValueErrors were found in the config: \nlr must be positive\n",
    # the glued type without a traceback above it
    "    AttributeErrortrainer.train(): \n'DistributedSampler' object has no attribute "
    "'state_dict'\n",
    # a type no built-in: a framework's own class name glued to text
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 9, in main\n'
    "    run()\nMisconfigurationErrorhandler.check(): \nbad value\n",
    # the glued type whose next line is a frame, not a message
    'Traceback (most recent call last):\n  File "/home/u/train.py", line 9, in main\n'
    "    run()\nKeyErrortrainer.train(): \n"
    '  File "/home/u/train.py", line 10, in run\n',
], ids=["word-errors", "no-traceback", "not-builtin", "frame-below"])
def test_ordinary_words_glued_to_a_type_are_no_exception(text, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found == [] and int(result.exit_code) == 1


def test_a_launcher_s_summary_follows_the_rank_s_own_error(tmp_path, matrix):
    """fairseq#3237's shape: the ranks' TypeError (torch's NumPy refusal of a GPU tensor,
    the program's though it names CUDA) and torch.distributed.launch's summary below it,
    which is a consequence, never the cause."""
    text = (_tb(("/home/u/fairseq/tasks/translation.py", 410, "reduce_metrics",
                 'metrics.log_scalar("_bleu_counts", np.array(counts))'),
                (PY37 + "site-packages/torch/tensor.py", 480, "__array__",
                 "return self.numpy()"))
            + "TypeError: can't convert cuda:1 device type tensor to numpy. Use Tensor.cpu() "
            "to copy the tensor to host memory first.\n"
            + LAUNCH_RUNPY + '  File "' + PY37 + 'site-packages/torch/distributed/launch.py", '
            "line 257, in main\n    cmd=cmd)\nsubprocess.CalledProcessError: Command '['/opt/"
            "conda/bin/python', '-u', 'train.py', '--local_rank=3']' returned non-zero exit "
            "status 1.\n")
    found, result = _first(text, tmp_path, matrix)
    assert found == ["program.exception"]
    assert result.findings[0].exception.type == "TypeError"
    assert "launch.subprocess_failed" in [f.signature.id for f in result.consequences]


def test_a_rank_killed_under_the_old_launcher_stays_killed(tmp_path, matrix):
    """launch.py's summary of a rank that died of SIGKILL: launch.rank_killed reads it
    first, line by line."""
    found, _ = _first(LAUNCH_RUNPY + '  File "' + PY37 + 'site-packages/torch/distributed/'
                      "launch.py\", line 257, in main\n    cmd=cmd)\nsubprocess."
                      "CalledProcessError: Command '['python', '-u', 'train.py', "
                      "'--local_rank=0']' died with <Signals.SIGKILL: 9>.\n", tmp_path, matrix)
    assert found == ["launch.rank_killed"]


def test_the_new_findings_name_what_the_frames_show(tmp_path, matrix):
    fork = dict((x[0], x[1]) for x in PHASE_L)[
        "CPython 3.11 multiprocessing popen_fork.py _launch: a DataLoader's workers forked"]
    found, result = _first(fork + "\n", tmp_path, matrix)
    assert found == ["host.fork_memory"]
    assert result.findings[0].cause.endswith(
        "(the fork in multiprocessing/popen_fork.py, in _launch; started from "
        "/home/u/train.py:88, in main)")
    rdzv = [x[1] for x in PHASE_L if x[2] == "rendezvous.ipv6_unbracketed"][0]
    found, result = _first(rdzv + "\n", tmp_path, matrix)
    assert result.findings[0].cause.endswith(
        "(the port urllib read: 'db8::5:29500', in "
        + LIB + "torch/distributed/rendezvous.py:217, in _tcp_rendezvous_handler)")


# Phase M's guards: texts close to its wordings stay what they are.
@pytest.mark.parametrize("text,kind", [
    # the job's own function named barrier, and DeepSpeed's deepspeed.comm imported as
    # dist (whose barrier takes no timeout either): the call does not name torch's API
    (_tb(("/home/u/train.py", 40, "main", "barrier(timeout=30)"),
         ("/home/u/utils.py", 9, "wrapper", "return fn(*args, **kwargs)"))
     + "TypeError: barrier() got an unexpected keyword argument 'timeout'\n", None),
    (_tb(("/home/u/train.py", 40, "main", "dist.barrier(timeout=timedelta(minutes=30))"))
     + "TypeError: barrier() got an unexpected keyword argument 'timeout'\n", None),
    # a bare DistributedDataParallel( (apex's has no find_unused_parameters), a keyword no
    # torch release took, a keyword of the table said of another function, and
    # CenterPoint#59's shape: CPython 3.6 shows the call's last line, not the callee
    (_tb(("/home/u/train.py", 88, "main",
          "model = DistributedDataParallel(model, find_unused_parameters=True)"))
     + "TypeError: __init__() got an unexpected keyword argument 'find_unused_parameters'\n",
     "TypeError"),
    (_tb(("/home/u/train.py", 88, "main",
          "model = torch.nn.parallel.DistributedDataParallel(model, find_unused_params=True)"))
     + "TypeError: __init__() got an unexpected keyword argument 'find_unused_params'\n",
     "TypeError"),
    (_tb(("/home/u/train.py", 88, "main",
          "out = torch.nn.parallel.DistributedDataParallel(model, static_graph=True)(x)"))
     + "TypeError: forward() got an unexpected keyword argument 'static_graph'\n",
     "TypeError"),
    (_tb(("./tools/train.py", 128, "main", "logger=logger,"),
         ("/home/u/det3d/torchie/apis/train.py", 344, "train_detector",
          "find_unused_parameters=True,"))
     + "TypeError: __init__() got an unexpected keyword argument 'find_unused_parameters'\n",
     "TypeError"),
    # new_subgroups called by the job itself, torch's refusal without FSDP's frames
    (_tb(OWN_M, (LIB311 + "torch/distributed/distributed_c10d.py", 6190, "new_subgroups",
                 "raise ValueError("))
     + "ValueError: The arg 'group_size' (8) must not exceed the world size (2)\n",
     "ValueError"),
    (_tb(("/home/u/groups.py", 12, "make", "dist.new_subgroups(8)"),
         ("/home/u/distributed_c10d.py", 6190, "new_subgroups", "raise ValueError("))
     + "ValueError: The arg 'group_size' (8) must not exceed the world size (2)\n",
     "ValueError"),
    # accelerate's bf16 refusal names a device too: not read
    ("ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.\n",
     "ValueError"),
], ids=["own-barrier", "dist-alias-barrier", "bare-ddp", "keyword-never-taken",
        "other-function", "callee-not-shown", "own-new-subgroups", "own-copy-of-c10d",
        "bf16-device"])
def test_texts_close_to_phase_m_s_are_the_program_s(text, kind, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    if kind is None:  # a message naming a timeout and no signature: no finding
        assert found == [], found
    else:
        assert found[:1] == ["program.exception"], found
        assert result.findings[0].exception.type == kind


# Texts close to phase M's, and the causes none of them may get
NEAR_M = ({"env.package_version", "cuda.out_of_memory"}, [
    # the job's own import of a name torch lacks (its frame, not an installed package's):
    # no cause, as since phase J
    _tb(("/home/u/train.py", 3, "<module>",
         "from torch.distributed.fsdp._fully_shard._fsdp_common import ShardPlacementResult"))
    + "ImportError: cannot import name 'ShardPlacementResult' from "
    "'torch.distributed.fsdp._fully_shard._fsdp_common' (" + LIB311
    + "torch/distributed/fsdp/_fully_shard/_fsdp_common.py)\n",
    # an installed package importing another package's name (not torch's)
    _tb(OWN_M, (LIB311 + "peft/utils/other.py", 20, "<module>",
                "from transformers.pytorch_utils import Conv1D"))
    + "ImportError: cannot import name 'Conv1D' from 'transformers.pytorch_utils' ("
    + LIB311 + "transformers/pytorch_utils.py)\n",
    # vLLM's allocator with another CUDA error: not the OOM
    "RuntimeError: CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:62\n",
], ["own-import", "other-package", "other-cuda-error"])


def test_phase_m_s_findings_name_what_the_frames_show(tmp_path, matrix):
    lines = {x[0]: x[1] for x in PHASE_M}
    found, result = _first(lines["torch 1.0.0 nn/parallel/distributed.py __init__ (no "
                                 "find_unused_parameters before 1.1.0), CPython 3.7"] + "\n",
                           tmp_path, matrix)
    assert result.findings[0].cause.endswith(
        "(DistributedDataParallel takes find_unused_parameters from torch 1.1.0 (torch "
        "1.0.0 does not), called at /home/u/train.py:88, in main)")
    found, result = _first([x[1] for x in PHASE_M
                            if x[2] == "torch.fsdp_hybrid_shard_devices"][0] + "\n",
                           tmp_path, matrix)
    assert result.findings[0].cause.endswith(
        "(a group of 8 ranks, the GPUs torch counts on the node, in a world of 2, asked for "
        "at " + LIB311 + "torch/distributed/fsdp/_init_utils.py:212, in "
        "_init_intra_node_process_group)")
    found, result = _first([x[1] for x in PHASE_M if "import_from" in x[0]][0] + "\n",
                           tmp_path, matrix)
    assert "(torchtitan imports ShardPlacementResult from torch.distributed.fsdp._fully_shard."\
        "_fsdp_common, which the installed torch lacks, at " in result.findings[0].cause


# What phase N's program errors mean, said in the finding (PROGRAM_MEANINGS): torch's
# ProcessGroup.hpp (2.0 on) and ProcessGroupNCCL.cpp (1.x) refusals of a CPU tensor on an
# NCCL-only group, and transformers' trust_remote_code refusals. Each was the program's
# error before phase N too, without what it means (or, for a repository whose name holds
# NVIDIA, no finding at all).
@pytest.mark.parametrize("text,meaning", [
    (_tb(("/home/u/train.py", 60, "log_metrics", "dist.all_reduce(correct)"),
         (LIB311 + "torch/distributed/distributed_c10d.py", 2501, "all_reduce",
          "work = group.allreduce([tensor], opts)"))
     + "RuntimeError: No backend type associated with device type cpu\n",
     "a tensor on the CPU was given to a collective of a process group whose only backend "
     "is NCCL"),
    (_tb(("/home/u/train.py", 60, "log_metrics", "dist.all_reduce(correct)"),
         ("/opt/conda/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py",
          907, "all_reduce", "work = _default_pg.allreduce([tensor], opts)"))
     + "RuntimeError: Tensors must be CUDA and dense\n",
     "a tensor on the CPU was given to a collective of a process group whose only backend "
     "is NCCL"),
    ([x[1] for x in PHASE_N if "4.57.6" in x[0]][0] + "\n",
     "transformers refused to load a model"),
    ([x[1] for x in PHASE_N if "4.26.1" in x[0]][0] + "\n",
     "transformers refused to load a model"),
], ids=["no-backend-cpu", "cuda-and-dense", "trust-4.57", "trust-4.26"])
def test_phase_n_s_program_errors_say_what_they_mean(text, meaning, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    assert found[:1] == ["program.exception"], found
    assert meaning in result.findings[0].cause
    # the fix that goes with this meaning, not the other one's
    fix = {"a tensor on the CPU": "cpu:gloo,cuda:nccl",
           "transformers refused": "trust_remote_code=True"}
    wanted = [f for m, f in fix.items() if meaning.startswith(m)]
    advice = result.findings[0].signature.advice
    assert [f for f in fix.values() if f in advice] == wanted, advice


@pytest.mark.parametrize("text,kind", [
    # another device type than the CPU (a group of a backend without CUDA): not the CPU
    # tensor's meaning; its words name CUDA, no finding as before
    ("RuntimeError: No backend type associated with device type cuda\n", None),
    # the job's own import of a module it lacks: no cause (phase J), never the install's
    (_tb(("/home/u/train.py", 3, "<module>", "from mypkg.utils import load"))
     + "ModuleNotFoundError: No module named 'mypkg.utils'\n", None),
    # an installed package importing another package's module: which is out of step is
    # not this rule's to say
    (_tb(OWN_M, (LIB311 + "peft/tuners/lora/model.py", 30, "<module>",
                 "from transformers.integrations.bnb import dequantize_bnb_weight"))
     + "ModuleNotFoundError: No module named 'transformers.integrations.bnb'\n", None),
    # a module of a parent package (google.cloud is a namespace of many distributions)
    (_tb(OWN_M, (LIB311 + "google/cloud/bigquery/client.py", 44, "<module>",
                 "from google.cloud import storage"))
     + "ModuleNotFoundError: No module named 'google.cloud.storage'\n", None),
    # a module of another subpackage of the same package
    (_tb(OWN_M, (LIB311 + "deepspeed/ops/adam/cpu_adam.py", 9, "<module>",
                 "from deepspeed.ops.op_builder.cpu_adam import CPUAdamBuilder"))
     + "ModuleNotFoundError: No module named 'deepspeed.ops.op_builder.cpu_adam'\n", None),
    # the parent is a module, not a package: a file shadowing the package
    (_tb(OWN_M, (LIB311 + "deepspeed/runtime/engine.py", 1835, "_configure_zero_optimizer",
                 "from deepspeed.runtime.superoffload.stage3 import X"))
     + "ModuleNotFoundError: No module named 'deepspeed.runtime.superoffload.stage3'; "
     "'deepspeed.runtime.superoffload' is not a package\n", None),
    # one path: a lock or a chmod on a FUSE mount has other causes
    ("OSError: [Errno 38] Function not implemented: '/mnt/nfs/run/ckpt.lock'\n", "OSError"),
    # two filesystems, a permission: not a filesystem without the call
    ("OSError: [Errno 18] Invalid cross-device link: '/tmp/ckpt.pt' -> '/data/ckpt.pt'\n",
     "OSError"),
    ("PermissionError: [Errno 1] Operation not permitted: '/data/a.pt' -> '/data/b.pt'\n",
     "PermissionError"),
    # the same path of torch's, another failure (pytorch/pytorch#179220, open)
    ("RuntimeError: pidfd_getfd: Bad file descriptor\n", "RuntimeError"),
    # a parser's words of its own
    ("ValueError: unexpected EOF while parsing the config\n", "ValueError"),
], ids=["no-backend-cuda", "own-import", "other-package", "namespace-parent",
        "other-subpackage", "not-a-package", "one-path", "cross-device", "eperm-link",
        "pidfd-ebadf", "parser-eof"])
def test_texts_close_to_phase_n_s_are_the_program_s(text, kind, tmp_path, matrix):
    found, result = _first(text, tmp_path, matrix)
    if kind is None:  # an ImportError the install does not explain, CUDA's name: no cause
        assert found == [], found
    else:
        assert found[:1] == ["program.exception"], found
        assert result.findings[0].exception.type == kind
        assert "a tensor on the CPU" not in result.findings[0].cause


# Texts close to phase N's, and the causes none of them may get
NEAR_N = ({"nccl.release_bug", "nccl.foreign_connection",
     "launch.deepspeed_export_unquoted", "launch.slurm_gres_refused"}, [
    # the same CUDA failure at another line, or another error at the bug's line
    "h1:11:22 [0] transport.cc:160 NCCL WARN Cuda failure 'invalid argument'\n",
    "h1:11:22 [0] transport/p2p.cc:154 NCCL WARN Cuda failure 'invalid argument'\n",
    "h1:11:22 [0] transport.cc:154 NCCL WARN Cuda failure 'an illegal memory access was "
    "encountered'\n",
    # the UDS bind of 2.17-2.18 (the number alone) and of 2.23 on (line 58): no pidHash name
    "h1:11:22 [0] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket "
    "/tmp/nccl-socket-0-5d1e0c2a9b7f3e41 failed : 98\n",
    "h1:11:22 [0] misc/ipcsocket.cc:58 NCCL WARN UDS: Binding to socket "
    "/tmp/nccl-socket-0-5d1e0c2a9b7f3e41 failed : Address already in use (98)\n",
    # another NCCL's magic (random bytes): not a foreign client
    "h1:11:22 [0] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic "
    "9f1c2e88d04b7a13 != 7970663b906d70b9\n",
    # DeepSpeed 0.15.2's quoted value, an array assignment, a value without parentheses
    "[INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w n1,n2 export "
    "SLURM_JOB_CPUS_PER_NODE=\"64(x2)\"; export PYTHONPATH=/p;  cd /p; python -u -m "
    "deepspeed.launcher.launch --node_rank=%n train.py\n",
    "[INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w n1,n2 export NCCL_X=(a b);  cd /p; "
    "python -u -m deepspeed.launcher.launch --node_rank=%n train.py\n",
    "[INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w n1,n2 export NCCL_IB_HCA=mlx5_0:1; "
    " cd /p; python -u -m deepspeed.launcher.launch --node_rank=%n train.py\n",
    # Slurm's other refusals, and another tool's words
    "sbatch: error: Batch job submission failed: Invalid account or account/partition "
    "combination specified\n",
    "ERROR: Failed to validate job spec: field 'image' is immutable\n",
], ["other-line", "other-file", "other-cuda-error", "uds-2.18", "uds-2.23",
        "random-magic", "quoted-export", "array-export", "plain-export", "slurm-account",
        "other-tool"])


def test_phase_n_s_findings_name_what_the_frames_show(tmp_path, matrix):
    found, result = _first([x[1] for x in PHASE_N if "3.11 importlib" in x[0]][0] + "\n",
                           tmp_path, matrix)
    assert result.findings[0].cause.endswith(
        "(megatron.core.dist_checkpointing.strategies.filesystem_async is not in the "
        "installed megatron, which imports it at " + LIB311
        + "megatron/core/dist_checkpointing/strategies/torch.py:71, in <module>)")
    # a foreign client's text magic takes the place of the stray connection NCCL's error
    # would otherwise be read as
    found, result = _first([x[1] for x in PHASE_N if "HEAD" in x[0]][0] + "\n"
                           "h1:11:22 [0] NCCL INFO bootstrap.cc:701 -> 6\n"
                           "RuntimeError: NCCL error: remote process exited or there was a "
                           "network error, NCCL version 2.18.3\n", tmp_path, matrix)
    assert found[:1] == ["nccl.foreign_connection"], found


# Texts close to phase O's, and the causes none of them may get
NEAR_O = ({"launch.nproc_per_node_invalid", "checkpoint.device_missing",
     "launch.slurm_variable_missing"}, [
    # argparse's refusal of another option, and of a number torchrun reads itself
    "launch.py: error: argument --nnodes: invalid int value: ''\n",
    "train.py: error: argument --batch_size: invalid int value: ''\n",
    # torch.load's other refusals
    "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda."
    "is_available() was called\n",
    # a KeyError of another variable, and of a Slurm name no step sets
    "KeyError: 'MASTER_ADDR'\n",
    "KeyError: 'SLURM_MY_SETTING'\n",
    "KeyError: 'SLURM_PROCID_OFFSET'\n",
], ["other-option", "other-program", "other-load", "master-addr", "slurm-unknown",
        "slurm-longer"])


@pytest.mark.parametrize("message, meaning, fix", [
    # autograd's in-place check: its tensor type names CUDA, and it is still the program's
    ("RuntimeError: one of the variables needed for gradient computation has been modified "
     "by an inplace operation: [torch.cuda.FloatTensor [256]] is at version 5; expected "
     "version 4 instead. Hint: enable anomaly detection to find the operation that failed "
     "to compute its gradient, with torch.autograd.set_detect_anomaly(True).",
     "BatchNorm's running statistics", "convert_sync_batchnorm"),
    # a Slurm per-node count read with int()
    ("ValueError: invalid literal for int() with base 10: '4(x2)'",
     "'2(x3)' is 2 on each of 3 nodes", "SLURM_NODEID"),
    ("ValueError: invalid literal for int() with base 10: '8(x2),4'",
     "'2(x3)' is 2 on each of 3 nodes", "SLURM_NODEID"),
], ids=["inplace", "slurm-count", "slurm-count-list"])
def test_phase_o_s_program_errors_say_what_they_mean(message, meaning, fix, tmp_path, matrix):
    found, result = _first(_tb(OWN_M) + message + "\n", tmp_path, matrix)
    assert found[:1] == ["program.exception"], found
    first = result.findings[0]
    assert meaning in first.cause, first.cause
    assert fix in first.signature.advice, first.signature.advice


def test_another_int_refusal_gets_no_slurm_meaning(tmp_path, matrix):
    found, result = _first(_tb(OWN_M) + "ValueError: invalid literal for int() with base "
                           "10: '4x2'\n", tmp_path, matrix)
    assert found[:1] == ["program.exception"]
    assert "Slurm" not in result.findings[0].cause


# Texts close to phase P's, and the causes none of them may get
NEAR_P = ({"extension.cuda_mismatch", "gloo.socket_interface"}, [
    # the warning, then a build that went through
    DS_MINOR + "Using /root/.cache/torch_extensions/py38_cu117 as PyTorch extensions root...\n"
    "ninja: no work to do.\nTime to load cpu_adam op: 2.59 seconds\n",
    # a failed build with no minor-release warning above it
    "[1/3] c++ -c cpu_adam.cpp -o cpu_adam.o\nninja: build stopped: subcommand failed.\n",
    # an enforce's location, and the next line another log line (not indented)
    "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:84]\n"
    "ifa != nullptr. Unable to find address for: eth9\n",
], ["build-went-on", "build-failed-alone", "enforce-next-line-unindented"])


def test_the_port_in_use_says_every_rank_may_have_started_the_server(tmp_path, matrix):
    found, result = _first("    store = TCPStore(master_addr, master_port, world_size, "
                           "start_daemon, timeout)\nRuntimeError: Address already in use\n",
                           tmp_path, matrix)
    assert found[:1] == ["rendezvous.port_in_use"]
    assert "each took itself for rank 0" in result.findings[0].cause
    assert "print each rank's RANK and WORLD_SIZE" in result.findings[0].signature.advice


# Texts close to phase Q's, and the causes none of them may get
NEAR_Q = ({"checkpoint.resume_incomplete"}, [
    # another framework's resume refusal, and transformers' words for another file
    "ValueError: Could not find a valid checkpoint in /ckpt\n",
    "ValueError: Can't find a valid tokenizer at /ckpt\n",
    "[deepspeed] resuming from checkpoint /ckpt/checkpoint-5439\n",
], ["other-resume", "other-find", "resuming"])


@pytest.mark.parametrize("text", [
    # a checkpoint's write on a full disk, and the bare error
    _tb(OWN_M, (LIB311 + "torch/serialization.py", 967, "save",
                "_save(obj, opened_zipfile, pickle_module)"))
    + "OSError: [Errno 28] No space left on device\n",
    "OSError: [Errno 28] No space left on device\n",
], ids=["torch-save", "bare"])
def test_texts_close_to_phase_r_s_are_the_disk(text, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert found[:1] == ["checkpoint.disk_full"], found


# Texts close to phase S's, and the causes none of them may get
NEAR_S = ({"nccl.p2p_hang", "torch.ddp_reentrant_checkpoint"}, [
    # NCCL's init line, then an error a line states
    "h1:11:22 [0] NCCL INFO comm 0x55d4c0a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 47000 "
    "commId 0x47dc53f08cbcda96 - Init COMPLETE\n"
    "h1:11:22 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n",
    # torch's reentrant warning, then the job's own error
    "/usr/lib/python3.11/site-packages/torch/utils/checkpoint.py:85: UserWarning: None of the "
    "inputs have requires_grad=True. Gradients will be None\n"
    + _tb(OWN_M) + "KeyError: 'labels'\n",
    # another library's words about inputs without gradients
    "WARNING: None of the inputs require grad; LoRA adapters are frozen\n",
], ["init-then-error", "warning-then-error", "other-words"])


# Texts close to phase T's, and the causes none of them may get
NEAR_T = ({"gloo.socket_interface", "checkpoint.model_parallel_shards",
           "network.peer_connect"}, [
    # gloo's words for a host name it cannot resolve, printed without its condition
    "RuntimeError: Unable to find address for: node-1.cluster\n",
    "RuntimeError: rp != nullptr. Unable to find address for: enp-host\n",
    # another assertion about the world size
    "AssertionError: world size is 2, expected 4\n",
    # gloo's connect ending its line, and the next line not its peer
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect\n"
    "Traceback (most recent call last):\n",
], ["hostname", "hostname-condition", "world-size", "connect-then-other"])


def test_a_gloo_connect_broken_after_connect_reads_its_peer_and_error(tmp_path, matrix):
    """hpcaitech/ColossalAI#2407: the peer and the error pasted on the next line."""
    found, result = _first("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] "
                           "connect \n[127.0.1.1]:29591: Connection refused\n", tmp_path, matrix)
    assert found == ["network.peer_connect"]
    assert result.findings[0].line.text.endswith("connect [127.0.1.1]:29591: Connection refused")


# Texts close to phase U's, and the cause none of them may get
NEAR_U = ({"nccl.socket_interface"}, [
    # a connect to a routable address: a peer failure, not the loopback
    "NCCL WARN socketStartConnect: Connect to 10.0.0.127<45069> failed : Connection refused\n",
    "NCCL WARN socketStartConnect: Connect to 128.0.0.1<45069> failed : Connection refused\n",
    # c10d's own connect to the store on the loopback: the rendezvous, not NCCL's sockets
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 "
    "(errno: 111 - Connection refused).\n",
    # the loopback interface named, with no failure after it
    "h1:1:2 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\n",
], ["routable", "128", "c10d-store", "interface-only"])


def test_the_interface_line_still_needs_a_failure_and_a_loopback_connect_does_not(
        tmp_path, matrix):
    """Phase U moved NCCL's 'Using' lines to weak_match: they still name the cause only
    with a failed connect or a system error after them; the loopback connect alone does."""
    using = "h1:1:2 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\n"
    refused = ("h1:1:2 [0] NCCL WARN socketStartConnect: Connect to 10.0.0.2<43221> failed : "
               "Connection refused\n")
    assert _first(using, tmp_path, matrix)[0] == []
    found, result = _first(using + refused, tmp_path, matrix)
    assert found == ["nccl.socket_interface"]
    assert [f.signature.id for f in result.consequences] == ["network.peer_connect"]
    found, result = _first(refused.replace("10.0.0.2", "127.0.0.1"), tmp_path, matrix)
    assert found == ["nccl.socket_interface"] and not result.findings[0].conditional


# Texts close to phase V's (nvcc's refusal of an architecture), and the cause none of
# them may get
NEAR_V = ({"extension.arch_unsupported"}, [
    # nvcc's other fatal errors
    "nvcc fatal   : Unknown option '-fopenmp'\n",
    "nvcc fatal   : Value 'c++20' is not defined for option 'std'\n",
    # torch's own refusal of an architecture it does not know (cpp_extension)
    "ValueError: Unknown CUDA arch (9.5) or GPU not supported\n",
], ["unknown-option", "another-option", "torch-arch-list"])

# Texts close to phase W's, and the causes none of them may get
NEAR_W = ({"extension.cuda_home", "extension.cuda_mismatch"}, [
    # another file of the toolkit, another program
    "FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc.profile'\n",
    "FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/ptxas'\n",
    "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc_wrapper'\n",
    # DeepSpeed's warning, its versions written three ways: the build goes on
    "Installed CUDA version 12.6 does not match the version torch was compiled with 12.4 but "
    "since the APIs are compatible, accepting this combination\n",
    "Installed CUDA version 12.6.1 does not match the version torch was compiled with 12.4.0 "
    "but since the APIs are compatible, accepting this combination\n",
], ["nvcc-profile", "ptxas", "nvcc-wrapper", "ds-warning", "ds-warning-patch"])


# Texts close to phase Y's (torch elastic's agent on the signal it got), and the causes
# none of them may get: signals no hangup and no outside stop sends
NEAR_Y = ({"launch.hangup", "launch.agent_signalled"}, [
    # SIGUSR2, where TORCHELASTIC_SIGNALS_TO_HANDLE names it; the agent's own SIGKILL
    "W1127 10:26:34.890000 1647 torch/distributed/elastic/agent/server/api.py:753] "
    "Received 12 death signal, shutting down workers\n",
    "W1127 10:26:34.891000 1647 torch/distributed/elastic/multiprocessing/api.py:1028] "
    "Sending process 1652 closing signal SIGKILL\n",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1647 got "
    "signal: 12\n",
], ["sigusr2", "sigkill", "exception-sigusr2"])


# Texts close to phase Z's: files that are not a rank's part of collected results, and a
# part file another error kept from being read
NEAR_Z = ({"host.results_dir_not_shared"}, [
    "FileNotFoundError: [Errno 2] No such file or directory: 'data/train_part_1.pkl.gz'\n",
    "FileNotFoundError: [Errno 2] No such file or directory: 'cache/part.pkl'\n",
    "PermissionError: [Errno 13] Permission denied: '/shared/.dist_test/tmpab/part_0.pkl'\n",
    "UnpicklingError: pickle data was truncated: work_dirs/.eval_hook/part_1.pkl\n",
], ["dataset-part", "one-part", "permission", "truncated"])


# Texts close to phase AA's: a path execve did not find (not a command looked up on
# PATH), a step that ran, modules that are not torch's own, the job's own import of a
# removed torch module, and an error word after blanks on a line that is no traceback's
NEAR_AA = ({"host.command_missing", "launch.slurm_step_launch", "env.package_version",
            "program.exception"}, [
    "slurmstepd: error: execve(): /opt/venv/bin/torchrun: No such file or directory\n",
    "srun: launch/slurm: _step_signal: Terminating StepId=3022331.0\n",
    "ModuleNotFoundError: No module named 'torchvision'\n",
    "ModuleNotFoundError: No module named 'torch'\n",
    "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 3, in <module>\n"
    "    from torch._six import inf\nModuleNotFoundError: No module named 'torch._six'\n",
    "step 10 loss 0.51     ValueError: bad batch\n",
], ["a-path", "step-signal", "torchvision", "torch-itself", "own-import", "no-frame"])

# Texts close to phase AB's: userbuffers' other CUDA errors, and another library's words
NEAR_AB = ({"cuda.multicast_unsupported", "env.library_single_gpu",
            "cuda.ipc_expandable_segments"}, [
    "RuntimeError: /opt/te/userbuffers/userbuffers-host.cpp:208 in function "
    "create_communicator_grouped2: CUDA Error: out of memory\n",
    "RuntimeError: MyTrainer currently does not support multi GPU setups\n",
    "(Worker pid=1) Error in Worker.update: pidfd_getfd: Bad file descriptor\n",
], ["ub-oom", "other-library", "pidfd-ebadf"])


NEAR = [NEAR_M, NEAR_N, NEAR_O, NEAR_P, NEAR_Q, NEAR_S, NEAR_T, NEAR_U, NEAR_V, NEAR_W,
        NEAR_Y, NEAR_Z, NEAR_AA, NEAR_AB]


@pytest.mark.parametrize("text, forbidden", [
    (text, forbidden) for forbidden, texts, _ in NEAR for text in texts], ids=[
    "%s-%s" % (phase, case) for phase, (_, _, ids) in zip(list("MNOPQSTUVWYZ") + ["AA", "AB"], NEAR)
    for case in ids])
def test_texts_close_to_a_phase_s_are_no_such_cause(text, forbidden, tmp_path, matrix):
    found, _ = _first(text, tmp_path, matrix)
    assert not forbidden & set(found), found

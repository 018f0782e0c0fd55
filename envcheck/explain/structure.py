"""The structure of a failed job's log, read before its text is matched.

A distributed job's log is many processes talking at once. Before any failure signature
is matched, this reads what the log is made of:

- **who said each line**: ``line.parse`` (rank, local rank, host, from every launcher's
  prefix);
- **the Python exceptions, whole**: each exception line with its traceback's frames,
  read back from it through the same rank's lines only (ranks interleave), and which
  frame is the job's own code: not the standard library, not torch, and, where the job
  has code of its own in the traceback, not a site-packages library either. A log
  pasted with its traceback in reverse has the frames below the exception line; two
  ranks that failed at the same moment leave their writes mixed within a line (CPython
  writes an exception's type, ``": "``, its message and the newline, and a source
  line's indentation, text and newline, each as a write of its own): the type or the
  message written twice, another rank's source line glued to the message. Both are read
  back to the one exception a rank raised;
- **the first failing rank**: the "Root Cause (first observed failure)" entry of
  torchrun's summary (torch elastic's own ranking: the earliest failure is the cause,
  the ranks that died after a peer died are consequences), with its exit code;
- **the watchdog's collectives**: each rank's timed-out ``WorkNCCL(SeqNum=N,
  OpType=OP)``, so that the ranks that never reached collective N show.

``arrange`` then decides what comes first: when the first failure is an exception the
environment does not explain (no signature matched it, and it names no part of the
environment: NCCL, CUDA, a socket, a store...), the answer is that exception, as the
program's own error, with its file and line and the ranks it hit; environment causes
that the log shows later are listed after it, the symptoms on other ranks as
consequences.
"""

import ast
import builtins
import dataclasses
import re
import sys

from ..core.text import rank_set, shorten
from ..matrix.signatures import TRACEBACK_RULES as RULE_NAMES, Signature
from . import line as line_mod
from .match import Finding

# The colon may follow blanks: another rank's indentation written between the type and it
EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception)))(?:[ \t]*:\s?(.*))?$")
FRAME = re.compile(r'^File "([^"]+)", line (\d+), in (\S+)')
TRACEBACK = "Traceback (most recent call last)"
# CPython's separators between the exceptions of a chain (traceback.c, traceback.py)
CHAINED = ("During handling of the above exception",
           "The above exception was the direct cause of the following exception")
FRAMES_BELOW = 200  # lines read below an exception line for a traceback pasted in reverse
# Two ranks' writes mixed the other way (issue #34, phase L, nomic-ai/contrastors#15): rank
# A's type, then rank B's source line glued to it (B's indentation before it), then A's
# ': ', then B's newline, and A's message alone on the next line:
# '    AttributeErrortrainer.train(): ' / ''DistributedSampler' object has no attribute ...'.
# Read only for a type CPython itself defines (a built-in exception, printed without a
# module), glued to a call as a traceback shows one, the line ending with the colon, with
# a traceback's frames above it and the message on the next line of the same rank: an
# ordinary word ending in 'Error' followed by text is none of that.
BUILTIN_TYPES = sorted((n for n, v in vars(builtins).items()
                        if isinstance(v, type) and issubclass(v, BaseException)
                        and n.endswith(("Error", "Exception"))), key=len, reverse=True)
GLUED_TYPE = re.compile(r"^(%s)[ \t]*[a-z_][\w.]*\(.*?[ \t]*:$" % "|".join(BUILTIN_TYPES))
GLUED = 8  # the shortest source line taken for one glued to an exception's message
# A traceback's last source line and its exception line on one line, the exception after a
# run of blanks (a terminal's wrapped line copied with the padding that filled it; issue
# #34, phase AA: alibaba/Pai-Megatron-Patch#183, '...dtype=inputs_embeds.dtype    ...
# AttributeError: 'NoneType' object has no attribute 'dtype''). Read only right below a
# frame's 'File "...", line N, in F' line, and only with the type's colon and message.
# VS Code's debugger, copied from its exception popup (issue #34, phase AB:
# NVIDIA/NeMo-Aligner#153): 'Exception has occurred: RuntimeError' (and its note on the
# same line), the message on the next line, then the frames innermost first, each
# 'File "...", line N, in F' above its source line
VSCODE = re.compile(r"^Exception has occurred: ((?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception)))"
                    r"(?:\s|$)")
PADDED = re.compile(r"^\S.*?[ \t]{3,}(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)"
                    r"[ \t]*:.*)$")


def _stdlib_names():
    """The standard library's top-level module names (this Python's: they change little
    between releases, and a frame's module is looked up by name only)."""
    names = getattr(sys, "stdlib_module_names", None)
    if names is None:  # Python 3.9
        import pkgutil
        import sysconfig
        names = {m.name for m in pkgutil.iter_modules([sysconfig.get_paths()["stdlib"]])}
    # generic words a job's own directory may be named (D:\project\lib\test\) left out
    return sorted(n for n in names if re.fullmatch(r"\w+", n)
                  and n not in ("test", "code", "this", "site"))


# Frames that are not the job's own code: the standard library, torch, frozen modules.
# On Windows the standard library is the installation's Lib directory, with no
# pythonX.Y below it (sysconfig's 'nt' scheme: '{installed_base}/Lib'; conda prints
# 'lib'): a frame there is the standard library's where its module is one of its
# modules (a job's own D:\project\lib\train\... is not).
INTERNAL = re.compile(r"[/\\]lib[/\\]python\d[\d.]*[/\\](?!site-packages|dist-packages)"
                      r"|[/\\](?:site|dist)-packages[/\\]torch[/\\]|^<|^/usr/lib/python"
                      r"|\\[Ll]ib\\(?:%s)(?:\\|\.py$)" % "|".join(_stdlib_names()))
LIBRARY = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
# torch's own code in a source tree rather than site-packages (a developer's
# .../pytorch/torch/distributed/..., a Buck link tree's .../torch/nn/..., a path the poster
# shortened to .../torch/...): torch's subpackages and top-level modules as its source
# tree lays them out, so that a job's module of the same name (returnn/torch/distributed.py,
# a file) is not taken for torch's.
TORCH_TREE = re.compile(
    r"[/\\]torch[/\\](?:distributed|nn|cuda|utils|_dynamo|_inductor|autograd|multiprocessing"
    r"|optim|fx|amp|backends|testing|_functorch|export|_C|_refs|_prims|_higher_order_ops)[/\\]"
    r"|[/\\]torch[/\\](?:serialization|_tensor|_utils|functional|overrides|_ops|hub|storage"
    r"|random|_jit_internal|_compile|__init__)\.py$")
# The training stacks a job runs from a source checkout (an editable install, a clone on
# PYTHONPATH, Ray's working_dir), by the import names their PyPI packages install: a frame
# in a directory of that name is the stack's code, not the job's (issue #34, phase O; an
# installed one is under site-packages, where its directory names it). Ray's temporary
# directory (/tmp/ray/session_...) and a home directory of that name (/home/ray/, Ray's
# images' user) are not its code.
STACKS = ("deepspeed", "megatron", "megatron_patch", "transformers", "accelerate", "lightning",
          "pytorch_lightning", "lightning_fabric", "peft", "trl", "vllm", "sglang", "verl",
          "torchtitan", "torchtnt", "torchrec", "torchx", "fairseq", "fairscale", "apex",
          "colossalai", "nemo", "ray", "openrlhf", "nanotron", "composer", "mmengine", "mmcv",
          "detectron2", "timm", "diffusers", "datasets", "xformers", "transformer_engine",
          "torchao", "llamafactory", "swift", "skyrl_train", "horovod")
STACK_DIR = re.compile(r"[/\\](%s)[/\\](?!session_)" % "|".join(STACKS))
# Libraries that run what the code above them hands them, and refuse it as torch does:
# the frame to blame is their caller's (DeepSpeed's data analyzer calling NumPy's mmap on
# a file it had not flushed; verl calling uvloop's get_event_loop from a thread; a
# DataLoader iterated through tqdm).
FOUNDATION = frozenset({"numpy", "uvloop", "tqdm"})
HOME_DIR = re.compile(r"^(?:/home|/Users)/[^/\\]+(?=[/\\])")
# An exception that names a part of the environment is the environment's (or a peer's)
# failure, never the program's own, even when no signature knows its wording.
ENVIRONMENT = re.compile(
    r"NCCL|nccl|CUDA|cuda|cuDNN|c10d|[Gg]loo|ProcessGroup|TCPStore|[Ss]ocket|[Cc]onnection"
    r"|[Tt]imed out|[Tt]imeout|[Ww]atchdog|NVIDIA|[Dd]river|SIG[A-Z]{2,}|[Ss]ignal \d"
    r"|out of memory|shared memory|/dev/shm|[Rr]endezvous|Killed|[Rr]ank \d+ .*(?:failed|exited)")
# torch's checks of what the program passed, in words that name CUDA: the program's error
# (a CPU tensor given to an NCCL collective: ProcessGroupNCCL.cpp check_gpu_single_tensor;
# tensors of one op on two devices: ATen's TORCH_CHECK in TensorIterator and many ops;
# FSDP's parameters found off their GPU, moved there by the program or its framework
# outside FSDP's own CPU offload: _flat_param.py _check_on_compute_device, 2.0 on, read in
# 2.13.0, verl-project/verl#4799); a tensor on a GPU given to NumPy, which torch refuses
# (torch/csrc/utils/tensor_numpy.cpp, raised from Tensor.__array__ and Tensor.numpy():
# 'can't convert CUDA tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory
# first.' in 1.0-1.5, 'can't convert cuda:0 device type tensor to numpy. ...' from 1.6 on,
# read in the wheels of 1.0.0, 1.4.0, 1.6.0, 1.8.1, 1.10.0 and 2.13.0; issue #34, phase L:
# facebookresearch/fairseq#3237); transformers' refusal to run the code a model's
# repository ships without trust_remote_code=True, whatever the repository's name says
# ('NVIDIA-Nemotron-...': issue #34, phase N, verl-project/verl#5200; its wordings below,
# TRUST_REMOTE_CODE)
TRUST_REMOTE_CODE = (r"requires you to execute (?:the (?:code in the )?[\w ]+? file in that repo"
                     r"|custom code contained in the model repository)"
                     r"|^The repository (?:for )?\S+ (?:contains|references) custom code\b")
# autograd's check that a tensor it saved for backward was not changed in place since
# (torch/csrc/autograd/saved_variable.cpp, read in the 2.13.0 wheel's libtorch_cpu); the
# tensor's type in it names CUDA ('[torch.cuda.FloatTensor [256]]'): the program's error
# (issue #34, phase O: Project-MONAI/GenerativeModels#352)
INPLACE = (r"^one of the variables needed for gradient computation has been modified by an "
           r"inplace operation")
# A GPU kernel's own failure, reported by the CUDA runtime at the next call that waits for
# it: a device-side assertion (cudaErrorAssert, 710; 59 in CUDA before 10.1, 'cuda
# runtime error (59)' in torch 0.4-1.0's THC) and a load or store at an address no
# buffer holds (cudaErrorIllegalAddress, 700; 77 before). Their words name CUDA, but it
# is a kernel and what it was given that failed: the program's error, or its library's,
# with what they mean (PROGRAM_MEANINGS). Made on an H100 with torch 2.11.0+cu130
# (torch.AcceleratorError: 'CUDA error: device-side assert triggered' under Indexing.cu's
# assertion, and 'CUDA error: an illegal memory access was encountered'):
# tests/data/gpu/h100_device_assert.txt, h100_illegal_address.txt
KERNEL_ASSERT = (r"^CUDA error: device-side assert triggered"
                 r"|^cuda runtime error \(59\) : device-side assert triggered")
KERNEL_ADDRESS = (r"^CUDA error: an illegal memory access was encountered"
                  r"|^cuda runtime error \(77\) : an illegal memory access was encountered")
PROGRAM_TEXTS = re.compile(INPLACE + r"|Tensors must be CUDA and dense"
                           r"|" + KERNEL_ASSERT + r"|" + KERNEL_ADDRESS +
                           r"|Expected all tensors to be on the same device"
                           r"|^Expects tensor to be on the compute device \S+, was on \S+$"
                           r"|^can't convert (?:CUDA|\S+ device type) tensor to numpy\."
                           r"|" + TRUST_REMOTE_CODE)
# Where a C++ error of torch (c10::Error) was raised, in torch's own source tree: torch up
# to 1.6 appends ' (FUNC at FILE:LINE)' to the message (c10/util/Exception.cpp), 1.7 on
# prints 'Exception raised from FUNC at FILE:LINE (most recent call first):' on a line of
# its own, then the C++ backtrace's 'frame #N: ...' lines (c10/util/Backtrace.cpp); an
# assertion says 'EXPR ASSERT FAILED at FILE:LINE, please report a bug to PyTorch.' (1.4
# and before; 'INTERNAL ASSERT FAILED at "FILE":LINE' since). The path names torch's
# directories (c10d/reducer.cpp is DDP's checks of the model, cuda/ holds ATen's kernels),
# not a part of the environment: it is left out before the message is judged, so that a
# release that prints it on the message's line reads as one that prints it below.
CPP_WHERE = re.compile(r" \((?:[^()]|\(\))*? at [^\s()]+:\d+\)"
                       r"|(?<=ASSERT FAILED) at \"?[^\s\",]+\"?:\d+"
                       r"|Exception raised from .*? at \S+:\d+ \(most recent call first\):?")
# torch's refusals of what the program built, in words that do not say so: the program's
# error, with what it means and how to fix it (issue #34, phase H). A module with no
# parameter that requires a gradient wrapped in DDP: torch 1.x's reducer.cpp
# (Reducer::Reducer: AT_ASSERTM(replicas_[0].size() >= 1, "Expected at least one
# parameter."), read as 'replicas_[0].size() >= 1 ASSERT FAILED at .../reducer.cpp:53,
# please report a bug to PyTorch. Expected at least one parameter.'; TORCH_CHECK in later
# releases) and torch/nn/parallel/distributed.py ('DistributedDataParallel is not needed
# when a module doesn't have any parameter that requires a gradient.', an AssertionError,
# then a RuntimeError)
PROGRAM_MEANINGS = (
    (re.compile(r"replicas_\[0\]\.size\(\) >= 1|^Expected at least one parameter\.(?: \(|$)"
                r"|DistributedDataParallel is not needed when a module doesn't have any "
                r"parameter that requires a gradient"),
     "DistributedDataParallel was given a module with no parameter that requires a gradient "
     "(none at all, or all frozen), which torch refuses to wrap (older releases say it as "
     "the reducer's assertion 'Expected at least one parameter', and ask for a bug report: "
     "it is not torch's bug)",
     "wrap only the modules that train in DistributedDataParallel: a module without "
     "trainable parameters (a fixed layer, a frozen encoder, a loss network) needs no "
     "gradient synchronisation; move it to the rank's device (module.to(device)) and call "
     "it directly",
     "torch/csrc/distributed/c10d/reducer.cpp (Reducer::Reducer: 'Expected at least one "
     "parameter.'); torch/nn/parallel/distributed.py ('DistributedDataParallel is not "
     "needed when a module doesn't have any parameter that requires a gradient.')"),
    # A tensor on the CPU in a collective of a group that has NCCL alone (issue #34, phase
    # N: sgl-project/sglang#5322, huggingface/lerobot#3127; the same text as batch 7's
    # anomalib#1410 and batch 16's NeMo Automodel#3461, user code): torch 2.0 on keeps a
    # backend per device type in each ProcessGroup (ProcessGroup::getBackend: 'No backend
    # type associated with device type ' and the device, read in the wheels of 2.0.0,
    # 2.11.0, 2.12.1 and 2.13.0, not in 1.13.1); before it, and in 2.x for a tensor list
    # whose first tensor is on the GPU, ProcessGroupNCCL.cpp's check_gpu_single_tensor
    # ('Tensors must be CUDA and dense', in the 1.13.1 and 2.12.1 wheels' libtorch_cuda,
    # asserted by torch's own distributed_test.py from 1.8.1 on)
    (re.compile(r"No backend type associated with device type cpu\b"
                r"|Tensors must be CUDA and dense"),
     "a tensor on the CPU was given to a collective of a process group whose only backend "
     "is NCCL (init_process_group('nccl'), or a group or device mesh made for NCCL), which "
     "moves GPU tensors only: torch 2.0 on says the group has no backend for the CPU ('No "
     "backend type associated with device type cpu'), torch 1.x, and 2.x for a list whose "
     "first tensor is on the GPU, 'Tensors must be CUDA and dense' (a sparse GPU tensor is "
     "refused in the same words)",
     "create the tensor on the rank's GPU before the collective (torch.tensor(x, "
     "device=torch.device('cuda', local_rank)), t.to(device)): a value computed on the CPU "
     "(a metric, a count, a .cpu() before the all_reduce), an object sent through a tensor "
     "made on the CPU, or a module buffer replaced by a new CPU tensor (DDP broadcasts the "
     "buffers at each forward: update a buffer in place, buf.fill_(v) or buf.copy_(t)) are "
     "the usual ones; or give the group a CPU backend too: "
     "init_process_group('cpu:gloo,cuda:nccl') (torch 2.0 on), or a gloo group for the CPU "
     "tensors (dist.new_group(backend='gloo'))",
     "torch/csrc/distributed/c10d/ProcessGroup.hpp (ProcessGroup::getBackend: 'No backend "
     "type associated with device type ', torch 2.0 on); ProcessGroupNCCL.cpp "
     "check_gpu_single_tensor ('Tensors must be CUDA and dense'); "
     "https://github.com/sgl-project/sglang/pull/5322, "
     "https://github.com/huggingface/lerobot/issues/3127 (a framework's tensor made on the "
     "CPU, a buffer replaced by a CPU tensor)"),
    # autograd's in-place check (INPLACE; issue #34, phase O: Project-MONAI/GenerativeModels
    # #352): under DDP the usual cause is its own, broadcast_buffers=True copying every
    # buffer (BatchNorm's running statistics) in place before each forward, so that two
    # forwards before one backward (a GAN's discriminator on fake and real images) fail
    # (pytorch/pytorch#22095, #110363: a maintainer's answer with both fixes)
    (re.compile(INPLACE),
     "a tensor that autograd saved for the backward pass was changed in place before the "
     "backward ran (its version counter moved on); under DistributedDataParallel the usual "
     "one is a module buffer, BatchNorm's running statistics: DDP copies the buffers in "
     "place before every forward (broadcast_buffers=True, the default), so two forwards of "
     "the wrapped module before one backward fail",
     "under DDP: convert BatchNorm to SyncBatchNorm "
     "(torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)) or wrap with "
     "broadcast_buffers=False, or run backward after each forward; otherwise find the "
     "in-place operation with torch.autograd.set_detect_anomaly(True) and make it out of "
     "place (x = x + y, not x += y)",
     "torch/csrc/autograd/saved_variable.cpp ('one of the variables needed for gradient "
     "computation has been modified by an inplace operation'); "
     "https://github.com/pytorch/pytorch/issues/22095, "
     "https://github.com/pytorch/pytorch/issues/110363 (DDP's buffer broadcast, the two "
     "fixes)"),
    # a Slurm per-node count read as a number (issue #34, phase O: sehoffmann/dmlcloud#39):
    # Slurm writes SLURM_TASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE and
    # SLURM_JOB_CPUS_PER_NODE compressed, a count followed by '(xN)' for N nodes in a row
    (re.compile(r"^invalid literal for int\(\) with base 10: '\d+\(x\d+\)(?:,[\d(x)]+)*'$"),
     "the job read a Slurm per-node count as one number, but Slurm writes those variables "
     "(SLURM_TASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE) compressed "
     "when nodes repeat: '2(x3)' is 2 on each of 3 nodes, and int() cannot read it",
     "parse the N(xM) list (the count for this node is the entry for SLURM_NODEID), or read "
     "a variable that holds one number per task: SLURM_LOCALID, SLURM_NTASKS, "
     "SLURM_NTASKS_PER_NODE (set when --ntasks-per-node is given)",
     "Slurm's sbatch(1) and srun(1), OUTPUT ENVIRONMENT VARIABLES: SLURM_TASKS_PER_NODE "
     "(a count that consecutive nodes share is followed by '(x#)', the number of nodes); "
     "https://github.com/sehoffmann/dmlcloud/issues/39 ('1(x2)' from srun -n 2 --nodes 2)"),
    # a GPU kernel's device-side assertion (KERNEL_ASSERT): the kernel checked what it was
    # given and refused it; the line CUDA prints above the traceback names the kernel's
    # source, its function and the condition ('Indexing.cu:1515: indexSelectSmallIndex:
    # block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.')
    (re.compile(KERNEL_ASSERT),
     "a GPU kernel's own check of its inputs failed (a device-side assertion: the line "
     "'FILE.cu:LINE: KERNEL: ... Assertion `CONDITION` failed.' above the traceback names "
     "the kernel and what it checked); the usual ones are an index past the end of a tensor "
     "(a token id at or above the embedding's rows after tokens were added to the "
     "tokenizer, a class label outside [0, number of classes) in a loss, a gather or scatter "
     "index) and a probability outside [0, 1]; CUDA reports it at the next call that waits "
     "for the GPU, so the traceback's line may not be the call that failed, and the process "
     "cannot use the GPU again",
     "rerun with CUDA_LAUNCH_BLOCKING=1 (or the failing step on the CPU, where the same "
     "check raises a plain IndexError with the values) to find the call; then check the "
     "inputs the assertion names: input_ids.max() < model.get_input_embeddings().num_embeddings "
     "(model.resize_token_embeddings(len(tokenizer)) after adding tokens), labels in range "
     "or equal to the loss's ignore_index",
     "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
     "(cudaErrorAssert = 710: 'An assert triggered in device code during kernel execution. "
     "The device cannot be used again.'); ATen's kernels' CUDA_KERNEL_ASSERT "
     "(aten/src/ATen/native/cuda/Indexing.cu: 'srcIndex < srcSelectDimSize'), made on an "
     "H100 with torch 2.11.0 (tests/data/gpu/h100_device_assert.txt)"),
    # a load or store at an address no buffer of the process holds (KERNEL_ADDRESS)
    (re.compile(KERNEL_ADDRESS),
     "a GPU kernel read or wrote memory at an address outside every buffer it was given (an "
     "illegal memory access): a bug in a kernel or in what it was handed, most often a "
     "compiled extension or a custom kernel (flash-attn, xformers, apex, a Triton or CUDA "
     "kernel of the job's own) given shapes, strides or dtypes it does not support, or an "
     "op fed an index past a tensor's end; CUDA reports it at the next call that waits for "
     "the GPU, so the traceback's line may not be the call that failed, and the process "
     "cannot use the GPU again",
     "rerun with CUDA_LAUNCH_BLOCKING=1 so that the traceback stops at the call that failed, "
     "and under compute-sanitizer (its memcheck names the kernel and the address); if the "
     "same job and data run on other nodes and this one fails alone, read its kernel log "
     "(dmesg: 'NVRM: Xid' 31 is the page fault, 48, 63, 64, 94 or 95 are the GPU's memory "
     "errors) and check the GPU (nvidia-smi -q -d ECC, dcgmi diag -r 3)",
     "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
     "(cudaErrorIllegalAddress = 700: 'The device encountered a load or store instruction on "
     "an invalid memory address'); https://docs.nvidia.com/deploy/xid-errors/ (Xid 31, a GPU "
     "memory page fault: debug the application first); made on an H100 with torch 2.11.0 "
     "(tests/data/gpu/h100_illegal_address.txt)"),
    # transformers' refusal to run the code a model's repository ships (issue #34, phase N:
    # verl-project/verl#5200): dynamic_module_utils.py resolve_trust_remote_code, read in the
    # wheels of 4.26.1, 4.36.2 and 4.57.6 (TRUST_REMOTE_CODE above: 4.26.1's 'Loading X
    # requires you to execute the configuration file in that repo ...', and the modeling,
    # tokenizer, feature extractor, image processor and pipeline files' words; 4.36.2's
    # 'The repository for X contains custom code ...'; 4.57.6's 'The repository X contains
    # custom code which must be executed to correctly load the model.', 'references
    # custom code contained in', and the prompt's timeout, 'Loading this model requires
    # you to execute custom code contained in the model repository ...')
    (re.compile(TRUST_REMOTE_CODE),
     "transformers refused to load a model (its configuration, tokenizer or processor) "
     "whose repository ships code of its own, because the call that loads or builds it was "
     "not given trust_remote_code=True (in a job without a terminal, transformers' question "
     "gets no answer); the job's setting has to reach every call that builds the model, a "
     "framework's own among them (a checkpoint save that builds the model again from its "
     "configuration)",
     "pass trust_remote_code=True to the call the traceback shows (from_pretrained, "
     "from_config, AutoConfig or AutoTokenizer.from_pretrained), or set the framework's own "
     "option for it and check that it reaches that call (a framework that drops it on one "
     "path, such as verl's checkpoint save before verl-project/verl#5200, needs its fix); "
     "read the repository's code first: it runs on every rank",
     "transformers' dynamic_module_utils.py resolve_trust_remote_code (4.36.2 on; "
     "configuration_auto.py, tokenization_auto.py, auto_factory.py before), read in the "
     "wheels of 4.26.1, 4.36.2 and 4.57.6; https://github.com/verl-project/verl/pull/5200"),
)
NOT_PROGRAM = {"ChildFailedError", "DistBackendError", "DistNetworkError", "DistStoreError",
               "DistError", "OutOfMemoryError", "MemoryError", "ProcessRaisedException",
               "ProcessExitedException", "ImportError", "ModuleNotFoundError",
               "RendezvousError", "RendezvousConnectionError", "RendezvousTimeoutError",
               "CheckpointException"}  # wrappers of the ranks' own errors, printed below them
# An ImportError of a name the job's own module lacks: CPython (3.8 on, Python/ceval.c
# import_from) names the module's file, and one outside site-packages and the standard
# library is the job's own code (issue #34, phase J). Every other ImportError (a package
# missing or built for another torch: 'No module named X' does not say whose X is) stays
# no cause of the program's.
OWN_IMPORT = re.compile(r"^cannot import name '[^']+' from '[^']+' \((?![^)]*(?:[/\\](?:site|dist)-"
                        r"packages[/\\]|[/\\]lib[/\\]python\d))[^)]+\.py\)$")
# The traceback rules a signature may name (``traceback``, matrix/signatures.py
# TRACEBACK_RULES; issue #34, phase K): each reads an exception line's frames, outermost
# first, and says what they show (a short text, ending the finding's cause), or None.
SITE_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)(?:[/\\]([^/\\]+))?")
# a console script an installer wrote (pip's and conda's entry points: .../bin/torchrun,
# .../bin/deepspeed): a package's own entry point, not the job's code
CONSOLE_SCRIPT = re.compile(r"[/\\]bin[/\\][\w.-]+$")
SUBPROCESS = re.compile(r"(?:^|[/\\])subprocess\.py$")


def _package(path):
    """The installed package a frame's file belongs to (the directory or module under
    site-packages or dist-packages, an egg's inner one), or None."""
    m = SITE_PACKAGE.search(path)
    if not m:
        return None
    name = m.group(1)
    if name.endswith(".egg") and m.group(2):
        name = m.group(2)
    return re.split(r"[-.]", name, maxsplit=1)[0] if name.endswith((".py", ".egg")) else name


def library(path):
    """The library a frame's file is code of, by its import name: an installed package
    (site-packages, dist-packages) or a checkout of one of the training stacks (STACKS);
    None for the job's own code. torch and the standard library are not asked."""
    name = _package(path)
    if name:
        return name
    m = STACK_DIR.search(HOME_DIR.sub("", path))
    return m.group(1) if m else None


def _not_to_blame(path):
    """torch, the standard library, or a library the job hands its data to whose refusal
    is the caller's (FOUNDATION): not the frame to blame."""
    return bool(INTERNAL.search(path) or TORCH_TREE.search(path)
                or _package(path) in FOUNDATION)


def _own(path):
    """Whether a frame's file is the job's own code (not the standard library, not an
    installed package, not a console script an installer wrote)."""
    return not (INTERNAL.search(path) or LIBRARY.search(path)
                or (CONSOLE_SCRIPT.search(path) and not path.endswith(".py")))


def _at(frame):
    return "%s:%d, in %s" % frame


def _command_lookup(m, frames, whole, source):
    """A bare command name (no directory, no blank) that subprocess could not run: CPython
    raises the child's exec error from subprocess.py's _execute_child, naming the program
    as it was given (orig_executable); with no directory in it, exec searched PATH. Only
    where that is the innermost frame: the same message from open() or os.stat() of a file
    in the working directory is the program's."""
    path, _, function = frames[-1]
    if function != "_execute_child" or not SUBPROCESS.search(path) or not INTERNAL.search(path):
        return None
    callers = [f for f in frames if not INTERNAL.search(f[0])]
    said = "'%s' is not on PATH" % m.group("command")
    return "%s; run from %s" % (said, _at(callers[-1])) if callers else said


def _two_packages(m, frames, whole, source):
    """An installed package calling another one's API in a shape the installed release
    of it does not have. The call is made in the innermost frame (CPython raises a
    call's TypeError, and an attribute's AttributeError, in the caller's frame), which
    must be an installed package's (A), never the job's own code:

    - ``module 'B.x' has no attribute 'y'``: B is named; it must be another package than
      A, and torch or a package whose frames the traceback shows installed;
    - a call's TypeError (an unexpected keyword, a count of arguments): the message does
      not say whose function was called (it may be a callback the job passed in), so
      only in a whole traceback with no frame of the job's own code at all (a package's
      entry point: a launcher) whose frames show another installed package B (a
      subclass or a plugin of A's, overriding what A calls)."""
    inner = frames[-1]
    missing = m.groupdict().get("imported") == "ModuleNotFoundError"
    # a torch module the installed torch lacks, imported by a package or by a checkout of
    # a training stack (Megatron's, issue #34 phase AA: 'No module named 'torch._six'')
    a = library(inner[0]) if missing else _package(inner[0])
    if a is None:
        return None
    packages = [_package(f[0]) for f in frames]
    module = m.groupdict().get("module")
    if module:
        b = module.split(".")[0]
        if b == a or (b != "torch" and b not in packages):
            return None
        if missing:
            return ("%s imports %s, a module the installed %s does not have (removed, or "
                    "not yet added), at %s" % (a, module, b, _at(inner)))
        if m.groupdict().get("imported"):
            return "%s imports %s from %s, which the installed %s lacks, at %s" % (
                a, m.group("attribute"), module, b, _at(inner))
        return "%s calls %s.%s, which the installed %s lacks, at %s" % (
            a, module, m.group("attribute"), b, _at(inner))
    if not whole or any(_own(f[0]) for f in frames):
        return None
    others = [p for p in packages if p and p != a]
    if not others:
        return None
    return "%s and %s: the call at %s" % (others[-1], a, _at(inner))


# The launchers that run each rank as a subprocess and raise CalledProcessError for the
# first that exits with an error (issue #34, phase L): torch.distributed.launch from 1.1
# to 1.8 (launch.py main: 'raise subprocess.CalledProcessError(returncode=...,
# cmd=process.args)' in 1.1-1.3, 'cmd=cmd', the last rank's command line, in 1.4-1.7;
# 1.8's sigkill_handler; 1.0 only waited, 1.9 on runs torch elastic: ChildFailedError),
# read in the wheels of 1.0.0, 1.1.0, 1.4.0, 1.6.0, 1.8.1 and 1.9.0; accelerate launch
# (commands/launch.py simple_launcher and deepspeed_launcher, 0.20.3, 0.26.1, 1.15.0)
LAUNCHERS = {("torch/distributed/launch.py", "main"),
             ("torch/distributed/launch.py", "sigkill_handler"),
             ("accelerate/commands/launch.py", "simple_launcher"),
             ("accelerate/commands/launch.py", "deepspeed_launcher")}
# Where CPython forks: multiprocessing's fork start method (popen_fork.py _launch:
# 'self.pid = os.fork()'), its spawn and forkserver start methods (util.py
# spawnv_passfds: _posixsubprocess.fork_exec), subprocess (subprocess.py _execute_child:
# _fork_exec / _posixsubprocess.fork_exec; _posix_spawn: os.posix_spawn), read in 3.8,
# 3.11 and 3.12
FORKS = {("multiprocessing/popen_fork.py", "_launch"),
         ("multiprocessing/util.py", "spawnv_passfds"),
         ("subprocess.py", "_execute_child"), ("subprocess.py", "_posix_spawn")}


def _innermost(frames, places):
    """(the innermost frame, the tail of ``places`` it matched) where that frame is one
    of ``places`` ((file's tail, function)) in the standard library or an installed
    package (never the job's own copy of such a file), else None."""
    path, _, function = frames[-1]
    path = path.replace("\\", "/")
    if _own(path):
        return None
    for tail, name in places:
        if function == name and (path == tail or path.endswith("/" + tail)):
            return frames[-1], tail
    return None


def _launcher_summary(m, frames, whole, source):
    """A launcher's CalledProcessError for a rank it started, raised in the launcher's
    own frame; the job's own subprocess.run(check=True) or check_call raises it in
    subprocess.py's frame, and stays the program's error."""
    found = _innermost(frames, LAUNCHERS)
    return "raised by the launcher at %s" % _at(found[0]) if found else None


def _fork(m, frames, whole, source):
    """An OSError of errno 12 raised where CPython forks (FORKS: the innermost frame):
    the kernel refused the memory for the new process. The same error anywhere else (an
    mmap, an allocation of the job's) is not read."""
    found = _innermost(frames, FORKS)
    if found is None:
        return None
    said = "the fork in %s, in %s" % (found[1], found[0][2])
    callers = [f for f in frames if not INTERNAL.search(f[0])]
    return "%s; started from %s" % (said, _at(callers[-1])) if callers else said


def _rendezvous_url(m, frames, whole, source):
    """urllib's refusal of a URL's port (parse.py, the port property), where torch's
    rendezvous handler (torch/distributed/rendezvous.py: _tcp_rendezvous_handler's
    'result.port') parsed the URL: the job's own URL parsing is not read."""
    if _innermost(frames, {("urllib/parse.py", "port")}) is None:
        return None
    torch_frames = [f for f in frames if f[0].replace("\\", "/").endswith(
        "torch/distributed/rendezvous.py")]
    if not torch_frames:
        return None
    return "the port urllib read: '%s', in %s" % (m.group("port"), _at(torch_frames[-1]))


# The keywords torch added to its distributed APIs, read from the signatures in the
# wheels of 1.0.0, 1.1.0, 1.4.0, 1.6.0, 1.8.1, 1.9.0, 1.10.0, 1.13.1, 2.0.0, 2.11.0, 2.12.1
# and 2.13.0 (DistributedDataParallel.__init__ in torch/nn/parallel/distributed.py;
# barrier, init_process_group, new_group, new_subgroups in distributed_c10d.py; issue #34,
# phase M): (API, keyword) -> (the first release read that takes it, the last read that
# does not). Keywords a release took through **kwargs (1.0's init_process_group) are not
# here: no release refused them.
TORCH_KEYWORDS = {
    ("DistributedDataParallel", "find_unused_parameters"): ("1.1.0", "1.0.0"),
    ("DistributedDataParallel", "gradient_as_bucket_view"): ("1.8.1", "1.6.0"),
    ("DistributedDataParallel", "static_graph"): ("1.13.1", "1.10.0"),
    ("DistributedDataParallel", "init_sync"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "delay_all_reduce_named_params"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "param_to_hook_all_reduce"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "mixed_precision"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "device_mesh"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "skip_all_reduce_unused_params"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "bucket_cap_mb_list"): ("2.11.0", "2.0.0"),
    ("DistributedDataParallel", "batched_grad_copy"): ("2.12.1", "2.11.0"),
    ("DistributedDataParallel", "forward_sync_buffers"): ("2.13.0", "2.12.1"),
    ("barrier", "device_ids"): ("1.8.1", "1.6.0"),
    ("barrier", "timeout"): ("2.12.1", "2.11.0"),
    ("init_process_group", "pg_options"): ("1.9.0", "1.8.1"),
    ("init_process_group", "device_id"): ("2.11.0", "2.0.0"),
    ("new_group", "backend"): ("1.1.0", "1.0.0"),
    ("new_group", "pg_options"): ("1.9.0", "1.8.1"),
    ("new_group", "use_local_synchronization"): ("2.11.0", "2.0.0"),
    ("new_group", "group_desc"): ("2.11.0", "2.0.0"),
    ("new_group", "device_id"): ("2.11.0", "2.0.0"),
    ("new_group", "sort_ranks"): ("2.12.1", "2.11.0"),
    ("new_subgroups", "group_desc"): ("2.11.0", "2.0.0"),
}
# A call of one of them by its qualified name, as the call's source line shows it (the
# job's own function of the same name, apex's DistributedDataParallel and DeepSpeed's
# deepspeed.comm.barrier, often imported as ``dist``, take other keywords: a bare
# ``DistributedDataParallel(`` or ``dist.barrier(`` does not say whose it is)
TORCH_CALL = re.compile(r"(?<![\w.])(?:(?:torch\.)?nn\.parallel\.(?:distributed\.)?"
                        r"(?P<ddp>DistributedDataParallel)"
                        r"|torch\.distributed\.(?:distributed_c10d\.)?(?P<function>\w+))\(")


def _torch_keyword(m, frames, whole, source):
    """A keyword a later torch release added to one of its distributed APIs
    (TORCH_KEYWORDS), passed to that API called by its qualified name in the innermost
    frame's source line (CPython raises a call's TypeError in the caller's frame). The
    message names the function (``__init__()`` or, from 3.10, its qualified name); the
    job's own function with a wrong keyword, or a call whose source line the traceback
    does not show, is not read."""
    call = TORCH_CALL.search(source or "")
    if call is None:
        return None
    api = call.group("ddp") or call.group("function")
    said = m.group("function").split(".")
    if said[-1] != ("__init__" if call.group("ddp") else api) or (
            len(said) > 1 and said[-2] != api):
        return None
    keyword = m.group("keyword")
    release = TORCH_KEYWORDS.get((api, keyword))
    if release is None:
        return None
    return "%s takes %s from torch %s (torch %s does not), called at %s" % (
        api, keyword, release[0], release[1], _at(frames[-1]))


# torch's refusal of a subgroup larger than the world (distributed_c10d.py new_subgroups:
# 'The arg 'group_size' (N) must not exceed the world size (M)', 2.0 on; without the
# numbers in 1.13), where FSDP's hybrid sharding asked for a group of one node's GPUs
# (fsdp/_init_utils.py _init_intra_node_process_group: 2.0.0's dist.new_subgroups(), whose
# group_size defaults to torch.cuda.device_count(); 2.11.0-2.13.0's
# new_subgroups(num_devices_per_node), the device handle's device_count())
FSDP_INTRA_NODE = ("torch/distributed/fsdp/_init_utils.py", "_init_intra_node_process_group")


def _torch_file(frame, tail, function):
    """Whether ``frame`` is torch's own ``tail`` in ``function``: under site-packages or
    dist-packages, or a path the poster shortened to '...' (never the job's own copy)."""
    path = frame[0].replace("\\", "/")
    return (frame[2] == function and path.endswith("/" + tail)
            and (not _own(path) or path.startswith(".../")))


def _fsdp_intra_node(m, frames, whole, source):
    """new_subgroups' refusal raised in torch's own frame, called from FSDP's
    _init_intra_node_process_group: the job's own new_subgroups call is not read."""
    if not _torch_file(frames[-1], "torch/distributed/distributed_c10d.py", "new_subgroups"):
        return None
    fsdp = [f for f in frames if _torch_file(f, *FSDP_INTRA_NODE)]
    if not fsdp:
        return None
    size, world = m.group("size"), m.group("world")
    said = ("a group of %s ranks, the GPUs torch counts on the node, in a world of %s"
            % (size, world)) if size and world else "a group of the GPUs torch counts on the node"
    return "%s, asked for at %s" % (said, _at(fsdp[-1]))


# The part of a frame's path below site-packages or dist-packages (an egg's directory
# left out): 'deepspeed/runtime/engine.py'
INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\](?:[^/\\]+\.egg[/\\])?(.+)$")


def _importers(frames):
    """The frames that may have made an import: importlib's and the standard library's
    own left out, installed packages' kept."""
    return [f for f in frames if not INTERNAL.search(f[0])
            or (LIBRARY.search(f[0]) and not f[0].startswith("<"))]


def _own_module(m, frames, whole, source):
    """An installed package's module importing a module of its own package that is not
    there: CPython's 'No module named 'A.b.c'' raised in the importing frame (an import
    statement; importlib's own frames are left out), where that frame's file is installed
    (site-packages or dist-packages) in the package A.b, the missing module's own parent.
    A sibling missing from the installed files is the install's, not the job's: the
    release was packaged without it, or the install is partial. The job's own import, an
    import of another package's or of a parent package's module (a namespace package such
    as google.cloud shares its directory between distributions) is not read."""
    callers = _importers(frames)
    if not callers:
        return None
    importer = callers[-1]
    found = INSTALLED.search(importer[0].replace("\\", "/"))
    missing = m.group("module")
    if found is None or "." not in missing:
        return None
    package = ".".join(found.group(1).split("/")[:-1])
    if not package or missing.rsplit(".", 1)[0] != package:
        return None
    return "%s is not in the installed %s, which imports it at %s" % (
        missing, missing.split(".")[0], _at(importer))


def _missing_module(m, frames, whole, source):
    """A top-level module that an import statement asked for and this interpreter does
    not find: CPython's 'No module named 'X'' raised in the importing frame (importlib's
    own frames left out). Its package is not installed for the Python that ran this
    process, or (a source checkout, the job's own module) not on its path from where the
    process started. Only in a traceback: an optional import's error printed on the way
    is a warning, and a dotted name is another rule's (own_module, two_packages)."""
    callers = _importers(frames)
    if not callers or "." in m.group("module"):
        return None
    return "%s, imported at %s" % (m.group("module"), _at(callers[-1]))


TRACEBACK_RULES = {"command_lookup": _command_lookup, "two_packages": _two_packages,
                   "launcher_summary": _launcher_summary, "fork": _fork,
                   "rendezvous_url": _rendezvous_url, "torch_keyword": _torch_keyword,
                   "fsdp_intra_node": _fsdp_intra_node, "own_module": _own_module,
                   "missing_module": _missing_module}
assert set(TRACEBACK_RULES) == set(RULE_NAMES)

# An environment cause this close below a program error is the same failure told twice
# (a wrapper, then the error it wraps): the environment's.
SAME_FAILURE_LINES = 10
EXCEPTIONS_READ = 256  # distinct exceptions whose tracebacks are read back
EXCEPTIONS_KEPT = 4096  # distinct exceptions kept at all (memory stays flat)
ROOT_CAUSE = "Root Cause (first observed failure)"
SUMMARY = re.compile(r"^\s*(rank|host|exitcode|time)\s*:\s*(\S+)")
WORK = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")

PROGRAM = Signature(
    id="program.exception", cause="", patterns=(), source="", where=None,
    advice="fix the program at that line: this is the job's own code (or a library it "
           "calls), not the environment; the errors of the other ranks (a closed "
           "connection, a timeout, torchrun's summary) follow from this rank's exit. "
           "Run the same code on one process (python train.py) to reproduce it quickly")


# A library's own code raised (or called torch with what torch refused): either a bug of
# that library's, fixed in one of its releases, or a use of it that its release does not
# support; the traceback cannot tell which, the two places to look can.
LIBRARY_ADVICE = (
    "%(library)s raised it, not the environment: check %(call)s against %(library)s's "
    "documentation for the installed version, and search %(library)s's issues for this "
    "message (a newer %(library)s may have fixed it; pip list | grep -i %(library)s shows "
    "the version installed); the errors of the other ranks (a closed connection, a "
    "timeout, torchrun's summary) follow from this rank's exit")


class Frames:
    """Who is to blame, from a traceback's ``frames`` ([(path, line number, function)],
    outermost first): an exception's, or a traceback the log is cut inside."""

    @property
    def culprit(self):
        """The frame to blame: the deepest frame that is neither torch nor the standard
        library (the job's own code, or a library it runs that raised or called torch
        with what torch refused), else None (no traceback in the log, or only torch's
        and the standard library's frames)."""
        found = [f for f in self.frames if not _not_to_blame(f[0])]
        return found[-1] if found else None

    @property
    def library(self):
        """The import name of the library whose code the culprit is, or None (the job's
        own code, or no traceback)."""
        where = self.culprit
        return library(where[0]) if where else None

    @property
    def caller(self):
        """Where the job's own code called into that library: its deepest frame of its
        own, or None (no library raised, or no frame of the job's own in the log)."""
        if not self.library:
            return None
        own = [f for f in self.frames if not _not_to_blame(f[0]) and library(f[0]) is None]
        return own[-1] if own else None


@dataclasses.dataclass
class Exc(Frames):
    """One exception, the same on every rank and line that raised it."""
    type: str  # "AttributeError"
    message: str
    frames: list  # [(path, line number, function)], outermost first
    ranks: set
    hosts: set
    file: str
    line: object  # line.Line of its first exception line
    order: tuple  # (input index, line number): when the log first shows it
    explained: bool = False  # a signature matched it, or it names the environment
    count: int = 0
    reaction: bool = False  # a symptom's signature matched it: a reaction to a peer


class Structure:
    def __init__(self, judge=None):
        # judge(line, file, frames, whole, source): the signature an exception line's traceback
        # names (match.Matcher.feed_exception with TRACEBACK_RULES), or None
        self.judge = judge
        self.files = {}  # input name -> its index: where a line is, in reading order
        self.exceptions = {}  # key -> Exc
        self.by_text = {}  # (type, message) -> the first Exc of that text
        # {"rank", "host", "exitcode", "where", "time"} of each torchrun agent's Root
        # Cause: one per host whose agent's log is given (first_failure picks the job's)
        self.roots = []
        self.work = {}  # rank -> (SeqNum, OpType) of its timed-out collective
        self.cut = []  # [Cut]: the inputs that end inside a traceback (ended())

    def feed(self, hit, ln, file, matched):
        """One scanned line: ``ln`` its ``line.Line``, ``matched`` the signature that
        matched it (or None)."""
        text = ln.text
        index = self.files.setdefault(file, len(self.files))
        if text.startswith(ROOT_CAUSE):
            root = _root_cause(hit, file)
            if root is not None and all(r["rank"] != root["rank"] for r in self.roots):
                self.roots.append(root)
            return
        if "WorkNCCL(" in text:
            w = WORK.search(text)
            if w and ln.rank is not None:
                self.work.setdefault(ln.rank, (int(w.group(1)), w.group(2)))
        m = EXCEPTION.match(text)
        glued = GLUED_TYPE.match(text) if m is None else None
        vscode = VSCODE.match(text) if m is None and glued is None else None
        if m is None and glued is None and vscode is None:
            padded = PADDED.match(text)
            if padded is None or not _below_a_frame(hit, ln):
                return
            m = EXCEPTION.match(padded.group("exc"))
            if m is None:
                return
        frames, sources, whole, source = None, (), False, ""
        if len(self.exceptions) < EXCEPTIONS_READ and vscode is None:
            frames, sources, whole, source = _traceback(hit, ln)
        if vscode is not None:
            message, frames = _vscode_below(hit, ln)
            if message is None or not frames:
                return
            full, name = vscode.group(1), vscode.group(2)
        elif glued is not None:
            message = _message_below(hit, ln) if frames else None
            if message is None:
                return
            full, name = glued.group(1), glued.group(1)
        else:
            if matched is None and frames and self.judge is not None:
                matched = self.judge(ln, file, frames, whole, source)
            full, name, message = _unmixed(m.group(1), (m.group(3) or "").strip(), sources)
        explained = (matched is not None
                     or (name in NOT_PROGRAM and not OWN_IMPORT.match(message))
                     or bool(ENVIRONMENT.search(full + " " + CPP_WHERE.sub("", message))
                             and not PROGRAM_TEXTS.search(message)))
        key = (name, message[:200], frames[-1] if frames else None)
        exc = self.exceptions.get(key)
        if exc is None and not frames:
            # the same exception without its traceback: another rank's copy of it, or
            # torchrun's summary repeating it
            exc = self.by_text.get(key[:2])
        if exc is None:
            if len(self.exceptions) >= EXCEPTIONS_KEPT:
                return
            exc = self.exceptions[key] = Exc(name, message, frames or [], set(), set(), file,
                                             ln, (index, ln.number), explained)
            self.by_text.setdefault(key[:2], exc)
        exc.explained = exc.explained or explained
        exc.reaction = exc.reaction or bool(matched is not None and matched.symptom)
        exc.count += 1
        if ln.rank is not None:
            exc.ranks.add(ln.rank)
        if ln.host:
            exc.hosts.add(ln.host)

    def ended(self, file, tail, lines):
        """One input read to its end: ``tail``, its last lines (bytes, read.Scan.tail);
        ``lines``, how many it has. Returns its Cut, where it ends inside a traceback."""
        cut = cut_traceback(file, tail, lines)
        if cut is not None:
            self.cut.append(cut)
        return cut

    @property
    def root(self):
        """The job's first failure among its agents' Root Causes: each torchrun agent
        names the first failure among its own host's ranks only, so two hosts' logs hold
        two. Not one whose rank's first error is a reaction to a peer (a symptom: the
        closed connection another host's ranks die of) where another is not; then the
        earliest (torch elastic's ranking, its time to the second only, each agent's
        as it saw its rank end); else the first given."""
        if len(self.roots) < 2:
            return self.roots[0] if self.roots else None
        first = self.first_errors()
        return min(self.roots, key=lambda r: (
            r["rank"] in first and first[r["rank"]].reaction, r.get("time") or "~"))

    def program(self):
        """The exceptions no environment failure explains, earliest first."""
        return sorted((e for e in self.exceptions.values() if not e.explained),
                      key=lambda e: e.order)

    def first_errors(self):
        """Each rank's first exception in the log, {rank: Exc} (torch elastic's reading:
        the earliest failure of a rank is its own; what follows is a consequence)."""
        first = {}
        for exc in sorted(self.exceptions.values(), key=lambda e: e.order):
            for rank in exc.ranks:
                first.setdefault(rank, exc)
        return first

    def _collectives(self):
        """[(SeqNum, OpType, ranks)] of the watchdog's timed-out collectives, and the
        ranks that were behind (a lower SeqNum than the highest), with that SeqNum."""
        by_seq = {}
        for rank, (seq, op) in self.work.items():
            by_seq.setdefault((seq, op), set()).add(rank)
        groups = [(seq, op, ranks) for (seq, op), ranks in sorted(by_seq.items())]
        behind = None
        if len(by_seq) > 1:
            top = max(seq for seq, _ in by_seq)
            behind = (sorted(r for (seq, _), rs in by_seq.items() if seq < top for r in rs), top)
        return groups, behind

    def summary(self):
        """What the structure says beyond the findings, as short lines."""
        out = []
        if self.root:
            r = self.root
            out.append("first failure (torchrun's Root Cause): rank %d%s%s (%s)"
                       % (r["rank"], " on %s" % r["host"] if r["host"] else "",
                          ", exit code %d" % r["exitcode"] if r["exitcode"] is not None
                          else "", r["where"]))
        groups, behind = self._collectives()
        for seq, op, ranks in groups:
            out.append("watchdog: collective %s SeqNum=%d timed out on %s"
                       % (op, seq, _ranks(ranks)))
        if behind:
            out.append("  ranks %s were behind: they never reached SeqNum=%d"
                       % (_ranks(behind[0]), behind[1]))
        out += [cut.summary() for cut in self.cut]
        return out

    def to_dict(self):
        """The structure as data (``--format json``'s ``structure``)."""
        groups, behind = self._collectives()
        return {
            "first_failure": {k: v for k, v in self.root.items() if k != "time"}
            if self.root else None,
            "rank_first_errors": [dict(exception_dict(exc), rank=rank)
                                  for rank, exc in sorted(self.first_errors().items())],
            "collectives": [{"op": op, "seq": seq, "ranks": sorted(ranks)}
                            for seq, op, ranks in groups],
            "behind": {"ranks": behind[0], "never_reached": behind[1]} if behind else None,
            "cut_tracebacks": [cut.to_dict() for cut in self.cut],
            "summary": self.summary(),
        }


@dataclasses.dataclass
class Cut(Frames):
    """A traceback the log ends inside, before its exception line: a log copied or
    excerpted short, or a process killed while it printed. The error is not in the log;
    where the job was is."""
    file: str
    line_number: int  # the log's last line: where the traceback is cut
    frames: list  # [(path, line number, function)], outermost first
    rank: object  # the rank whose lines they are, or None
    whole: bool  # its first line ('Traceback (most recent call last):') is in the log
    # the innermost frame's statement raising an exception of a literal message, read as
    # the missing exception line: (its line's number, its index in the tail given to
    # cut_traceback, 'Type: message'), or None
    raised: object = None

    @property
    def last(self):
        """The frame to blame (Frames.culprit), else the deepest frame shown (a launcher's
        way in: runpy's and torch's frames only)."""
        return self.culprit or self.frames[-1]

    def summary(self):
        who = "rank %d's traceback" % self.rank if self.rank is not None else "a traceback"
        last = self.last
        if self.library:
            at = "in %s's code at %s:%d (in %s)" % ((self.library,) + last)
            if self.caller:
                at += ", called from the job's own code at %s:%d (in %s)" % self.caller
        elif not self.culprit:
            at = "at %s:%d (in %s)" % last
        else:
            at = "in the job's own code at %s:%d (in %s)" % last
        if self.raised:
            return ("the log ends inside %s (%s:%d), cut before its error line; its last "
                    "frame, %s, raises %s there, read as that line" % (
                        who, self.file, self.line_number, at,
                        self.raised[2].split(":", 1)[0]))
        return ("the log ends inside %s (%s:%d), cut before its error line, which says "
                "what failed: its last frame is %s" % (who, self.file, self.line_number, at))

    def next_step(self):
        """What to collect: the lines the log lacks."""
        if self.raised:
            return ("the rest of the log, after line %d of %s: it ends inside a traceback "
                    "whose last statement says what was raised, and the lines after it "
                    "say what came of it on the other ranks" % (self.line_number, self.file))
        return ("the rest of the log, after line %d of %s: it ends inside a traceback, and "
                "the line below the traceback's last frame (the exception) names what failed"
                % (self.line_number, self.file))

    def to_dict(self):
        last, caller = self.last, self.caller
        return {"file": self.file, "line_number": self.line_number, "rank": self.rank,
                "whole": self.whole, "frames": len(self.frames),
                "frame": {"path": last[0], "line": last[1], "function": last[2],
                          "library": self.library},
                "called_from": ({"path": caller[0], "line": caller[1], "function": caller[2]}
                                if caller else None)}


def cut_traceback(file, tail, lines=None):
    """The ``Cut`` of a log whose last lines (``tail``, bytes, oldest first) are a
    traceback's frames and source lines with no exception line after them, else None.
    ``lines``: the log's number of lines (its last line's number), where known."""
    parsed = [line_mod.parse(0, raw) for raw in tail]
    while parsed and not parsed[-1].text.strip():
        parsed.pop()
    if not parsed:
        return None
    rank = parsed[-1].rank
    frames, whole, statement = [], False, None
    for at in range(len(parsed) - 1, -1, -1):
        prev = parsed[at]
        if rank is not None and prev.rank is not None and prev.rank != rank:
            continue  # another rank's line, interleaved
        text = prev.text
        f = FRAME.match(text)
        if not frames and not f and _source_line(prev):
            statement = at  # below the innermost frame: its source line
        if f:
            frame = (f.group(1), int(f.group(2)), f.group(3))
            if not frames or frames[-1] != frame:
                frames.append(frame)
        elif text.startswith(TRACEBACK):
            whole = bool(frames)
            break
        elif EXCEPTION.match(text):
            return None  # its exception line above the frames: a traceback pasted in reverse
        elif not (_indented(prev) or not text.strip("^~ ")):
            break  # a line of something else above the frames
        # else a frame's source line, or the carets under it
    if not frames:
        return None
    frames.reverse()
    last = lines if lines is not None else len(parsed)
    raised = None
    if statement is not None:
        said = _raise_statement(parsed[statement].text)
        if said is not None:
            raised = (last - (len(parsed) - 1 - statement), statement, said)
    return Cut(file, last, frames, rank, whole, raised)


# A traceback cut before its exception line, whose innermost frame's source line raises
# an exception built from one literal message ("raise RuntimeError('Unsloth currently
# does not support multi GPU setups - but we are working on it!')"): the statement says
# what was raised, its type and its words, and is read as the exception line the log
# lacks (issue #34, phase AC: batch 35's unslothai/unsloth#1933). An f-string, a name,
# a concatenation or a call's several arguments is not read: the words printed are not
# the statement's. The type is as written (CPython prints a class outside builtins with
# its module: 'mypkg.errors.MyError', where the statement may say 'MyError').
RAISE = re.compile(r"^raise ((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\(\s*"
                   r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")\s*\)\s*$""")


def _raise_statement(text):
    """'Type: message' of a source line ``raise Type('literal message')``, else None."""
    m = RAISE.match(text.strip())
    if m is None:
        return None
    try:
        message = ast.literal_eval(m.group(2))
    except (ValueError, SyntaxError):
        return None
    if not isinstance(message, str) or not message.strip():
        return None
    return "%s: %s" % (m.group(1), message)


def exception_dict(exc):
    """One exception as data: its type and message, where the log shows it first, the
    frame to blame, and whether it is the program's own (no environment explains it)."""
    where = exc.culprit
    return {"type": exc.type, "message": shorten(exc.message, 2000), "file": exc.file,
            "line_number": exc.line.number, "ranks": sorted(exc.ranks),
            "program": not exc.explained,
            "frame": ({"path": where[0], "line": where[1], "function": where[2],
                       "own_code": exc.library is None, "library": exc.library}
                      if where else None),
            "called_from": ({"path": exc.caller[0], "line": exc.caller[1],
                             "function": exc.caller[2]} if exc.caller else None)}


def _root_cause(hit, file):
    """torchrun's "Root Cause (first observed failure)" entry: the lines below it."""
    found = {}
    for n, raw in enumerate(hit.following(8), 1):
        m = SUMMARY.match(line_mod.bare(raw))
        if m:
            found.setdefault(m.group(1), (m.group(2), n))
    if "rank" not in found or not found["rank"][0].isdigit():
        return None
    code = found.get("exitcode", ("", 0))[0]
    return {"rank": int(found["rank"][0]), "host": found.get("host", (None,))[0],
            "exitcode": int(code) if code.lstrip("-").isdigit() else None,
            "where": "%s:%d" % (file, hit.number + found["rank"][1]),
            "time": found.get("time", (None,))[0]}


def _ranks(ranks):
    return rank_set(sorted(ranks))


def _traceback(hit, ln):
    """(frames, sources, whole, source) of an exception line: its traceback's frames, outermost
    first, read back through its own rank's lines to the traceback's first line (or the
    previous exception), or, where none is above, below it (a traceback pasted in
    reverse); the source lines shown above it, stripped (another rank's source line
    may be glued to the message); and whether the traceback is whole (its first line,
    'Traceback (most recent call last):', is in the log above its frames); and the
    innermost frame's source line, where the log shows it ('' else)."""
    frames, sources, whole, source = [], [], False, ""
    for raw in reversed(hit.lookback()):
        prev = line_mod.parse(0, raw)
        if ln.rank is not None and prev.rank is not None and prev.rank != ln.rank:
            continue  # another rank's line, interleaved
        text = prev.text
        if text.startswith(TRACEBACK) or text.startswith(CHAINED):
            whole = text.startswith(TRACEBACK) and bool(frames)
            break
        f = FRAME.match(text)
        if f:
            frame = (f.group(1), int(f.group(2)), f.group(3))
            if not frames or frames[-1] != frame:  # two ranks' copies, line by line
                frames.append(frame)
        elif EXCEPTION.match(text):
            break  # the previous exception: its frames are not this one's
        elif len(text) >= GLUED and _indented(prev):
            sources.append(text)
        if not frames and not f and _source_line(prev):
            source = text  # below the innermost frame: its source line (not the carets)
    frames.reverse()
    if not frames:
        return _frames_below(hit, ln), sources, whole, ""
    return frames, sources, whole, source


def _below_a_frame(hit, ln):
    """Whether the line above ``ln`` (of its own rank) is a traceback's frame line."""
    for raw in reversed(hit.lookback()):
        prev = line_mod.parse(0, raw)
        if ln.rank is not None and prev.rank is not None and prev.rank != ln.rank:
            continue
        return bool(FRAME.match(prev.text))
    return False


def _source_line(line):
    """Whether ``line`` is a traceback's source line: indented, and not the carets under
    one."""
    return _indented(line) and bool(line.text.strip("^~ "))


def _indented(line):
    """Whether ``line`` is indented as CPython indents a traceback's source lines (four
    blanks, after the launcher's prefixes)."""
    before = line.shown[:len(line.shown) - len(line.text)]
    return before.endswith("    ")


def _frames_below(hit, ln):
    """The frames of a traceback pasted in reverse (innermost first, below its exception
    line), outermost first; [] where the lines below are not such frames (a traceback
    that starts below belongs to the next exception)."""
    frames = []
    for raw in hit.following(FRAMES_BELOW):
        nxt = line_mod.parse(0, raw)
        if ln.rank is not None and nxt.rank is not None and nxt.rank != ln.rank:
            continue
        text = nxt.text
        f = FRAME.match(text)
        if f:
            frames.append((f.group(1), int(f.group(2)), f.group(3)))
        elif text.startswith(TRACEBACK) or EXCEPTION.match(text):
            break
        elif not frames and text and not text.startswith(CHAINED):
            break  # not a traceback
    frames.reverse()
    return frames


def _vscode_below(hit, ln):
    """(message, frames outermost first) below VS Code's 'Exception has occurred: T'
    line: the next non-blank line, then frame lines each above its source line, read
    innermost first; (None, []) where the lines below are not that."""
    message, frames = None, []
    for raw in hit.following(FRAMES_BELOW):
        nxt = line_mod.parse(0, raw)
        text = nxt.text
        if message is None:
            if text:
                if FRAME.match(text) or EXCEPTION.match(text) or text.startswith(TRACEBACK):
                    return None, []
                message = text
            continue
        f = FRAME.match(text)
        if f:
            frames.append((f.group(1), int(f.group(2)), f.group(3)))
        elif not text or (frames and raw[:1] in (b" ", b"\t")):
            continue  # a frame's source line, indented below it
        else:
            break
    frames.reverse()
    return message, frames


def _message_below(hit, ln):
    """The message of an exception line whose type another rank's source line was glued
    to (GLUED_TYPE): the next non-blank line of the same rank, where it is a message (not
    a frame, a source line as CPython indents it, a traceback's first line or another
    exception), else None."""
    for raw in hit.following(4):
        nxt = line_mod.parse(0, raw)
        if ln.rank is not None and nxt.rank is not None and nxt.rank != ln.rank:
            continue
        text = nxt.text
        if not text:
            continue
        if (FRAME.match(text) or _indented(nxt) or text.startswith(TRACEBACK)
                or text.startswith(CHAINED) or EXCEPTION.match(text) or GLUED_TYPE.match(text)):
            return None
        return text
    return None


def _unmixed(full, message, sources):
    """(type as printed, type, message) of an exception line as one rank wrote it, where
    another rank's writes were mixed into it: the type twice ('ValueErrorValueError: :
    ...'), the message twice, another rank's source line (one of ``sources``) glued
    before or after the message. A line no other rank wrote into is returned as it is."""
    times = next((n for n in range(len(full) // 3, 1, -1)
                  if len(full) % n == 0 and full == full[:len(full) // n] * n), 1)
    twice = times > 1  # written by two ranks, or more (open_lm#234: three)
    if twice:
        full = full[:len(full) // times]
    if twice or message.startswith(full):
        for _ in range(max(times - 1, 1)):
            again = re.match(r"(?:%s)?[ \t]*:[ \t]?" % re.escape(full), message)
            if not (again and again.end()):
                break
            message, twice = message[again.end():], True
    if twice:
        half = len(message) // 2
        if len(message) % 2 == 0 and message[:half] == message[half:]:
            message = message[:half]
    for source in sources:
        if len(message) > len(source):
            if message.startswith(source):
                message = message[len(source):].lstrip()
            elif message.endswith(source):
                message = message[:-len(source)].rstrip()
    return full, full.rsplit(".", 1)[-1], message


def _finding(exc):
    where = exc.culprit
    what = "%s: %s" % (exc.type, exc.message) if exc.message else exc.type
    if where is None:
        cause = ("the program raised %s (no traceback in the log names a line); no failure "
                 "of the environment explains it: it is most likely the job's own code" % what)
    elif exc.library is None:
        cause = ("the program raised %s at %s:%d (in %s): an error in the job's own code, "
                 "not in the environment" % (what, where[0], where[1], where[2]))
    else:
        called = (", called from the job's own code at %s:%d (in %s)" % exc.caller
                  if exc.caller else "")
        cause = ("the program raised %s in %s's code at %s:%d (in %s)%s: an error in a "
                 "library the job runs, not in the environment"
                 % (what, exc.library, where[0], where[1], where[2], called))
    source = "the traceback in this log (%s:%d)" % (exc.file, exc.line.number)
    advice = PROGRAM.advice
    if exc.library:
        advice = LIBRARY_ADVICE % {"library": exc.library, "call": (
            "the job's call at %s:%d" % exc.caller[:2] if exc.caller
            else "how the job calls it")}
    for pattern, meaning, fix, where_from in PROGRAM_MEANINGS:
        if pattern.search(exc.message):
            cause, advice = "%s: %s" % (cause, meaning), "%s; %s" % (fix, advice)
            source = "%s; %s" % (source, where_from)
            break
    sig = dataclasses.replace(PROGRAM, cause=cause, advice=advice, source=source)
    f = Finding(sig, exc.file, exc.line, set(exc.ranks), set(exc.hosts), exc.count)
    f.exception = exc
    return f


def _told_below(exc, causes, structure):
    """An exception whose message begins with a newline (torch 1.x's cpp_extension:
    RuntimeError('\\nThe detected CUDA version ...')) is printed as its type and ': '
    alone on a line, its message on the next ones: where a signature read the next line,
    that is the exception's own message, not a second failure."""
    if exc.message:
        return False
    for f in causes:
        at = (structure.files.get(f.file, 0), f.line.number)
        if at[0] == exc.order[0] and 0 < at[1] - exc.order[1] <= 2:
            return True
    return False


def arrange(structure, findings, consequences):
    """(findings, consequences) with the program's own error first where it is the first
    failure of the log."""
    # a guess read from lines a working job prints too (or from a traceback's source
    # line) stands only where the log shows nothing else: never before or beside the
    # program's own error, nor where an exception line names the environment in words no
    # signature reads (that line, not the guess, is what the log states)
    if structure.exceptions:
        findings = [f for f in findings if not getattr(f, "alone", False)]
    causes = [f for f in findings if not f.signature.symptom]
    program = [e for e in structure.program() if not _told_below(e, causes, structure)]
    if not program:
        return findings, consequences
    lead = program[0]
    symptoms = [f for f in findings if f.signature.symptom]
    root = structure.root["rank"] if structure.root else None
    cause_at = (structure.files.get(causes[0].file, 0), causes[0].line.number) if causes else None
    first = (not causes
             or (lead.order < cause_at and not (lead.order[0] == cause_at[0] and cause_at[1]
                                                - lead.order[1] <= SAME_FAILURE_LINES))
             or (root is not None and root in lead.ranks and root not in causes[0].ranks))
    programs = [_finding(e) for e in program]
    if first:
        return [programs[0]] + causes, programs[1:] + symptoms + consequences
    return causes + programs[:1], programs[1:] + symptoms + consequences

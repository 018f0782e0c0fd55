"""envcheck explain on real logs its signatures were not written from (issue #34).

tests/data/explain_unseen.toml holds real failure logs from public threads that
explain_corpus.toml does not cite, each with the cause its thread established. They were
split once, by source (the sha256 of the link), before any rule was written: signatures
and structure rules were written from the "train" half (and from torch's own output made
here); the "heldout" half was not looked at while writing them. A second held-out batch
(``batch = 2``) was collected after the rules were committed and run once; so was a third
(``batch = 3``), committed before explain was first run on it; and a fourth (``batch =
4``), collected after the rules were widened from torch's, NCCL's and gloo's own error
texts, committed with its causes before explain was first run on it, and asserted at the
level that first run measured. Rules written from a
held-out log after its batch was measured make that log training data
(``heldout_when_measured``); the measured figure keeps it as it was (docs/explain.md).
The held-out hit rate is the measure of what the next user's log gets.

The right answer is the entry's family: a signature id, or "user" (the job's own code:
the first finding must be the program's exception, of the entry's exception type, and
never an environment cause).
"""

import os

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "data", "explain_unseen.toml"), "rb") as f:
    ENTRIES = tomllib.load(f)["entry"]
TRAIN = [e for e in ENTRIES if e["split"] == "train"]
# The batches of the first held-out figure (MEASURED): batch 1's held-out half (no batch
# key), batches 2 and 3; each later batch is asserted at its own measured level below.
FIRST_BATCHES = (None, 2, 3)
HELDOUT = [e for e in ENTRIES
           if e["split"] == "heldout" and e.get("batch") in FIRST_BATCHES]
# Batch 5: collected after phase B (377c40a), committed with its causes before explain
# was first run on it.
BATCH5 = [e for e in ENTRIES if e.get("batch") == 5]
# Batch 6: collected after phase C (e5064cd), committed with its causes before explain was
# first run on it.
BATCH6 = [e for e in ENTRIES if e.get("batch") == 6]
# Batch 7: collected after phase D (1f5939a), committed with its causes before explain was
# first run on it.
BATCH7 = [e for e in ENTRIES if e.get("batch") == 7]
# Batch 4: collected after the rules were widened from the sources (phase A), committed with
# its causes before explain was first run on it; asserted at its measured level below.
BATCH4 = [e for e in ENTRIES if e.get("batch") == 4]
# Held out when their batch was measured, then used to write a rule (so training data now):
# the figure that counts is the one measured before (docs/explain.md), recorded here.
WRITTEN_FROM_AFTER = [e for e in ENTRIES if e.get("heldout_when_measured")]
MEASURED = {"heldout": 61, "right": 55}  # all three batches, each at its first run
# Batch 4, measured once (2e05e0b, the rules of 71a3084): 18 of 25, and that figure stays.
# The logs it got right must stay right; the 7 misses are listed in docs/explain.md (a
# family no signature reads, or a wording no rule knows). Rules were written from all 7
# after the measurement (8515a36, then phase B), so they are training logs now.
BATCH4_MEASURED = {"logs": 25, "right": 18}
BATCH4_MISSED = {
    "https://github.com/meta-pytorch/monarch/pull/1571",  # connect failure printed before the gai error
    "https://github.com/vllm-project/vllm/issues/7896",  # a bad node; only 'unhandled cuda error'
    "https://github.com/AkariAsai/self-rag/issues/83",  # elastic's '[ERROR] failed (exitcode: -9)'
    "https://github.com/2U1/Qwen-VL-Series-Finetune/issues/79",  # DeepSpeed's launcher, code -9
    "https://github.com/NVIDIA/nccl/issues/697",  # the interface NCCL chose: no signature reads it
    "https://github.com/NVIDIA/nccl/issues/473",  # docker /dev/shm; only 'NCCL Error 2'
    "https://github.com/pytorch/gloo/issues/223",  # gloo's older 'connect [addr]: Connection refused'
}

# Training logs whose thread's cause the log itself does not show: the right answer is
# the best the text allows (that family), not the thread's.
NOT_IN_THE_TEXT = {
    # batch 37, after it was measured (phase AD): a transformers dev build passing torch
    # 1.13's forward_prefetch to torch 1.12's FSDP, its one frame cut at its start (no
    # 'File "'), so the text names no caller; torchtune's failed Gemma save and a driver
    # too old for torch 2.8, each seen only as NCCL's watchdog timeouts; trl's upcast
    # parameters (the fix was axolotl's) seen only as FSDP's mixed-dtype refusal; a
    # rank's CUDA assertion (the user's sequences too long) seen only as the other ranks'
    # timeouts at two collectives, out of step
    "https://github.com/tatsu-lab/stanford_alpaca/pull/131": "program.exception",
    "https://github.com/meta-pytorch/torchtune/issues/1165": "nccl.watchdog_timeout",
    "https://github.com/zjysteven/lmms-finetune/issues/79": "nccl.watchdog_timeout",
    "https://github.com/axolotl-ai-cloud/axolotl/pull/1559": "torch.fsdp_mixed_dtype",
    "https://github.com/haotian-liu/LLaVA/issues/447": "torch.collective_mismatch",
    # LLaMA-Factory's own refusal of ZeRO-3 or FSDP with a PTQ-quantized model (an FP8
    # checkpoint): the program's error says it; no rule for one library's refusal
    "https://github.com/hiyouga/LlamaFactory/issues/6898": "program.exception",
    # batch 36, after it was measured: anemoi's sharded loss scaler refused as a ValueError
    # alone, with no frame to say whose (the fix was anemoi's); MACE's ranks out of step
    # (rank 0 alone left training early), its traceback cut inside torch's DDP check of
    # the parameters' shapes, before its error line
    "https://github.com/ecmwf/anemoi-core/issues/383": "program.exception",
    "https://github.com/ACEsuit/mace/issues/1215": None,
    # batch 35, after it was measured (phase AC): Unsloth's multi-GPU refusal of a job
    # shown one GPU (its check misjudged a shared node: the thread's finding), read from
    # the raising statement the log ends at; DataParallel's replica error in Unsloth's
    # code, cut before its error line; accelerate's refusal of a model loaded with
    # device_map='auto', called from LeRobot's training script (a checkout, not an
    # installed package: the policy's loading, which the fix changed, is not in the
    # traceback); NCCL's watchdog timeout of the first ALLGATHER alone (the GPU pair whose
    # P2P hung was found by the reporter's runs)
    "https://github.com/unslothai/unsloth/issues/1933": "env.library_single_gpu",
    "https://github.com/unslothai/unsloth/issues/362": "program.exception",
    "https://github.com/huggingface/lerobot/pull/2270": "program.exception",
    "https://github.com/determined-ai/determined/issues/8915": "nccl.watchdog_timeout",
    # batch 34, after it was measured: NeMo RL's NCCL environment not set on vLLM's
    # non-leader workers, seen only as vLLM's 'NCCL error: unhandled system error'; a
    # cross-rack NCCL hang seen only as Ray's 'A worker died ... unexpected system error';
    # TransformerEngine's Userbuffers bug seen only as its 'Failed, NCCL error' line;
    # Megatron-LM's 2019 checkout (its 'mpu' package, no 'megatron' directory) calling a
    # name torch 1.2 removed from torch._C; TE calling torch 2.4's is_autocast_enabled on
    # 2.1 in a traceback cut inside its last frame: the text names neither package whole
    "https://github.com/NVIDIA-NeMo/RL/issues/595": "nccl.system_error",
    "https://github.com/NVIDIA-NeMo/RL/issues/2937": None,
    "https://github.com/NVIDIA/TransformerEngine/issues/994": None,
    "https://github.com/NVIDIA/Megatron-LM/issues/7": None,
    "https://github.com/NVIDIA/TransformerEngine/issues/1473": "program.exception",
    # batch 33, after it was measured (phase AB): vLLM's 'NCCL error: unhandled system
    # error' alone (NeMo-RL's NCCL_CUMEM_ENABLE=0, found in the thread with
    # NCCL_DEBUG=TRACE); NeMo's view() refusing a shape, called from NeMo-Aligner's loss
    # (the fix was NeMo-Aligner's): the text shows NeMo's frame raise it
    "https://github.com/NVIDIA-NeMo/RL/issues/564": "nccl.system_error",
    "https://github.com/NVIDIA/NeMo-Aligner/issues/153": "program.exception",
    # batch 32, after it was measured (phase AA): pybind11's 'UbufP2PCommOverlap():
    # incompatible function arguments' alone, with no traceback: an application written
    # for an older TransformerEngine (the maintainer's answer), but the text names neither
    # package that called: the program's TypeError is the best it allows
    "https://github.com/NVIDIA/TransformerEngine/issues/1365": "program.exception",
    # the log holds only NCCL's 'unhandled system error'; the cause (Docker's network
    # isolation) is in the thread's discussion, not in any line of the log
    "https://github.com/pytorch/pytorch/issues/23363": "nccl.system_error",
    # batch 4, written from after it was measured: the log holds only torch's 'NCCL Error
    # 2: unhandled system error' (docker's small /dev/shm is in the thread), and only
    # 'NCCL error: unhandled cuda error' (the bad node is in the thread)
    "https://github.com/NVIDIA/nccl/issues/473": "nccl.system_error",
    "https://github.com/vllm-project/vllm/issues/7896": "nccl.cuda_error",
    # batch 7, after it was measured (phase E): the log holds only elastic's
    # 'RendezvousConnectionError: The connection to the C10d store has failed'; the host
    # name missing from /etc/hosts is in the thread (the reporter's finding), not the log
    "https://github.com/pytorch/pytorch/issues/67547": "rendezvous.unreachable",
    # batch 9, after it was measured (phase F): each log holds only NCCL's 'unhandled
    # system error' (and 'ncclSystemError: System call (socket, malloc, munmap, etc)
    # failed.'); docker's bridge network (--network=host fixed it) and a container's small
    # /dev/shm (--ipc=host fixed it) are in the threads, not the logs
    "https://github.com/deepinsight/insightface/issues/1444": "nccl.system_error",
    "https://github.com/HRNet/DEKR/issues/18": "nccl.system_error",
    # batch 12, after it was measured (phase I): transformers' Trainer deleting one
    # checkpoint from every process shows as the program's FileNotFoundError alone (no
    # frame of the rotation, no path of a checkpoint: the program's error, never an
    # environment cause); DeepSpeed's 'exits with return code = 2' alone (the comment
    # inside the continued launch command is in the thread) names no cause (None)
    "https://github.com/huggingface/transformers/issues/20988": "program.exception",
    "https://github.com/BAAI-DCAI/Bunny/issues/46": None,
    # batch 14, after it was measured (phase K): NCCL's 'invalid usage' without its
    # 'Duplicate GPU detected' WARN line (NCCL_DEBUG was not set; invalid usage has many
    # causes); five frameworks' own bugs, fixed in the framework, no rule: the best
    # each text allows is what it shows, the program's error in the framework's frame
    # (verl's FSDP parameters left on the CPU read so since phase K: FSDP's check of
    # where the program put them, on Ray's lines of another node), or no finding where
    # the log holds no exception line whole (transformers#10666)
    "https://github.com/facebookresearch/fairseq/issues/2924": "nccl.invalid_usage",
    "https://github.com/huggingface/transformers/issues/10666": None,
    "https://github.com/verl-project/verl/pull/4799": "program.exception",
    "https://github.com/deepspeedai/DeepSpeed/pull/7585": "program.exception",
    "https://github.com/pytorch/torchtitan/pull/1465": "program.exception",
    "https://github.com/deepspeedai/DeepSpeed/pull/7869": "program.exception",
    # batch 15, after it was measured (phase L): NCCL's 'unhandled cuda error' in a
    # reduce-scatter alone (the OOM was found by the maintainer's bisection, not in the
    # log); argparse's 'the following arguments are required' under DeepSpeed's launcher
    # (the job's own command line; the launcher's --local_rank before a lone YAML, which
    # LlamaFactory's parser then does not read as its config, is in the thread) names no
    # cause (None); Ray's ROCR_VISIBLE_DEVICES on AMD GPUs shows as torch's IndexError in
    # its CUDA seeding callback, the program's error in the job's frame (the variable and
    # the GPUs' vendor are in the thread); MLflow's expired credentials on a paste whose
    # every line begins with the editor's line number: no finding (no rule)
    "https://github.com/NovaSky-AI/SkyRL/pull/1761": "nccl.cuda_error",
    "https://github.com/hiyouga/LlamaFactory/issues/6075": None,
    "https://github.com/OpenRLHF/OpenRLHF/pull/536": "program.exception",
    "https://github.com/verl-project/verl/pull/5548": None,
    # batch 16, after it was measured (phase M): NCCL's watchdog timeout alone, its line
    # broken as posted (the two ranks on cuda:0 are in the thread); a TypeError of
    # barrier() with 'timeout' and no frame (deepspeed.comm's barrier takes no timeout
    # either: the message does not say whose barrier) and of __init__() with
    # 'find_unused_parameters' under CPython 3.6, whose frame shows the call's last line,
    # not the callee (apex's DistributedDataParallel lacks it too): the program's error or
    # no finding; NCCL's two topology checks ('Could not find NET with id 0', 'Failed to
    # find reverse path from remNode'), internal errors of many causes, no rule; torchrun's
    # summary of exit code -11 only; DeepSpeed's own recursion, the program's
    # RecursionError in DeepSpeed's frame; Ray's ROCR_VISIBLE_DEVICES, the same text as
    # batch 15's OpenRLHF#536, the program's IndexError
    "https://github.com/yiqiao-yin/deepspeed-course/pull/17": None,
    "https://github.com/yiqiao-yin/deepspeed-course/pull/19": None,
    "https://github.com/tianweiy/CenterPoint/issues/59": "program.exception",
    "https://github.com/NVIDIA-NeMo/Speech/issues/13996": None,
    "https://github.com/mila-iqia/milabench/issues/183": None,
    "https://github.com/NVIDIA/TransformerEngine/pull/1031": "launch.child_failed",
    "https://github.com/deepspeedai/DeepSpeed/pull/4962": "program.exception",
    "https://github.com/OpenRLHF/OpenRLHF/pull/524": "program.exception",
    # batch 17, after it was measured (phase N): DeepSpeed's data analyzer merging files it
    # had not flushed shows as NumPy's 'cannot mmap an empty file' in DeepSpeed's frame, a
    # framework's own bug the text cannot tell from an empty file of any other making: the
    # program's ValueError
    "https://github.com/deepspeedai/DeepSpeed/pull/5106": "program.exception",
    # batch 18, after it was measured (phase O): elastic's survivor's 'NCCL error: unhandled
    # system error' alone (the killed peers and NCCL's 'Connection closed by remote peer'
    # are in the thread); frameworks' own bugs whose log has no frame of the library that
    # was fixed: dmlcloud's Slurm parsing from its checkout (not a stack envcheck knows:
    # the program's ValueError, with what '1(x2)' means), DeepSpeed's ZeRO check, verl's
    # Megatron save and SkyRL's 2-D mesh without a traceback, DeepSpeed's BF16_Optimizer
    # lacking 'state' seen from Megatron-DeepSpeed's frame: the program's error
    "https://github.com/pytorch/elastic/issues/134": "nccl.system_error",
    "https://github.com/sehoffmann/dmlcloud/issues/39": "program.exception",
    "https://github.com/deepspeedai/DeepSpeed/issues/3810": "program.exception",
    "https://github.com/verl-project/verl/pull/5782": "program.exception",
    "https://github.com/NovaSky-AI/SkyRL/pull/554": "program.exception",
    "https://github.com/deepspeedai/DeepSpeed/pull/5767": "program.exception",
    # batch 19, after it was measured (phase P): NCCL's system error alone (Lightning's
    # barrier without device_ids, fixed in Lightning; a container's small /dev/shm, found
    # in NCCL's debug log by the maintainer); a library's bug whose log shows no frame of
    # it (trl's reference model given to DeepSpeed without an optimizer: the traceback cut
    # before DeepSpeed's last frame; OpenRLHF's and torchtune's one or two lines; prime-rl's
    # six ranks' FileNotFoundError lines): the program's error; a sentence that quotes
    # DeepSpeed's KeyError and accelerate's argparse refusal of its own Optional[str] type:
    # no finding; torch's 'Address already in use' alone where every rank of gpt-neox's
    # launch started the store's server: the port in use, which now says so
    "https://github.com/Lightning-AI/pytorch-lightning/issues/8139": "nccl.system_error",
    "https://github.com/MiniMax-AI/MiniMax-01/issues/42": "nccl.system_error",
    "https://github.com/huggingface/trl/pull/825": "program.exception",
    "https://github.com/OpenRLHF/OpenRLHF/issues/101": "program.exception",
    "https://github.com/meta-pytorch/torchtune/issues/2561": "program.exception",
    "https://github.com/PrimeIntellect-ai/prime-rl/pull/1678": "program.exception",
    "https://github.com/deepspeedai/DeepSpeed/pull/5318": None,
    "https://github.com/huggingface/accelerate/issues/18": None,
    "https://github.com/EleutherAI/gpt-neox/issues/849": "rendezvous.port_in_use",
    # batch 20, after it was measured (phase Q): CuPy's NCCL system error alone (vLLM's
    # NCCL_BUFFSIZE too large for the InfiniBand registration is in the thread); a chained
    # KeyError in Megatron's frame (dlrover's load, whose frame ends the log without its
    # exception line); DLRover's methods refusing ms-swift's arguments, a TypeError (the
    # release mismatch is in the thread); accelerate's ValueError and torch's missing
    # _set_static_graph quoted in a sentence, a type glued after its message, NCCL's
    # internal error of 2.25.1 alone: no finding
    "https://github.com/vllm-project/vllm/issues/19613": "nccl.system_error",
    "https://github.com/intelligent-machine-learning/dlrover/issues/977": "program.exception",
    "https://github.com/modelscope/ms-swift/issues/9912": "program.exception",
    "https://github.com/huggingface/trl/issues/2329": None,
    "https://github.com/JingyunLiang/VRT/issues/22": None,
    "https://github.com/bytedance/HLLM/issues/30": None,
    "https://github.com/NVIDIA-NeMo/Run/issues/266": None,
    # batch 21, after it was measured (phase R): logs cut before their error line
    # (Open-Sora's EMA deepcopy, DeepSpeed's missing ninja, torchdata's refused connect):
    # no finding; a library's bug with no frame of it (Ray Train's ZeRO-3 world size in
    # accelerate: two lines; DeepSpeed's engine frame cut at its start): the program's
    # error; NCCL's system error alone where the thread found docker's /dev/shm
    "https://github.com/hpcaitech/Open-Sora/issues/28": None,
    "https://github.com/deepspeedai/DeepSpeed/issues/5627": None,
    "https://github.com/meta-pytorch/data/issues/1142": None,
    "https://github.com/ray-project/ray/issues/44204": "program.exception",
    "https://github.com/deepspeedai/DeepSpeed/pull/4434": "program.exception",
    "https://github.com/LianjiaTech/BELLE/issues/136": "nccl.system_error",
    # batch 22, after it was measured (phase S): NCCL's watchdog teardown alone, where the
    # thread found InfiniBand unusable between the nodes; a traceback cut before its error
    # line (coati's SFT trainer: the cut is read, the error is not in the log): no
    # finding; torch's invalid device ordinal under Lightning's own set_device (which
    # index Lightning chose is in the thread, not the log); a library's bug with no frame
    # of it (Lightning's DeepSpeed resume, seen as torch's load_state_dict; ddp_spawn's
    # None, seen as the job's own TypeError): the program's error
    "https://github.com/karpathy/nanoGPT/pull/55": None,
    "https://github.com/hpcaitech/ColossalAI/issues/3355": None,
    "https://github.com/Lightning-AI/pytorch-lightning/issues/2407": "device.invalid_ordinal",
    "https://github.com/Lightning-AI/pytorch-lightning/issues/7282": "program.exception",
    "https://github.com/Lightning-AI/pytorch-lightning/issues/16758": "program.exception",
    # batch 23, after it was measured (phase T): NCCL 2.18.1's bug with no location in
    # NCCL's source (torch's 'Last error:' repeat), read as CUDA's failure inside NCCL; a
    # Ray task's TypeError cut before its message, and DeepSpeed's op missing cuRAND seen
    # as an ImportError of an undefined symbol: no finding; libraries' bugs with no frame
    # of them (trl, axolotl) and package releases out of step (DeepSpeed for EVA, mmcv for
    # the installed torch), seen as the program's error
    "https://github.com/vllm-project/vllm/issues/3688": "nccl.cuda_error",
    "https://github.com/OpenRLHF/OpenRLHF/pull/462": None,
    "https://github.com/deepspeedai/DeepSpeed/pull/1879": None,
    "https://github.com/huggingface/trl/issues/3012": "program.exception",
    "https://github.com/axolotl-ai-cloud/axolotl/pull/148": "program.exception",
    "https://github.com/thu-coai/EVA/issues/10": "program.exception",
    "https://github.com/yunxiangfu2001/SegMAN/issues/11": "program.exception",
    # batch 24, after it was measured (phase U): a traceback cut at the job's
    # torch.cuda.set_device (ColossalAI's launch), before its error line (more ranks than
    # the host's one GPU is in the thread): no finding; torchdistill run from a checkout
    # in the job's own directory (its frames are not site-packages': a stack the text
    # cannot tell from the job's own), torch's DDP assertion: the program's error
    "https://github.com/hpcaitech/ColossalAI/issues/2439": None,
    "https://github.com/yoshitomo-matsubara/torchdistill/issues/122": "program.exception",
    # batch 25, after it was measured (phase V): torch's message without its type and no
    # traceback (several GPUs used by one process started with plain python); a
    # TypeError with no frame (accelerate's call, fixed there); a traceback cut in
    # DeepSpeed's frame, and one pasted in two pieces without its exception line
    # (LLaMA-Factory's code, fixed there: neither shows its frames and error together);
    # an AttributeError of args.world_size in DINO's init_distributed_mode, which sets it
    # only from a launcher's variables (the text does not say none were set): the
    # program's error
    "https://github.com/hiyouga/LlamaFactory/issues/140": None,
    "https://github.com/huggingface/accelerate/issues/3923": "program.exception",
    "https://github.com/hiyouga/LlamaFactory/issues/3634": None,
    "https://github.com/hiyouga/LlamaFactory/issues/2189": None,
    "https://github.com/facebookresearch/dino/issues/88": "program.exception",
    # batch 26, after it was measured (phase W): DeepSpeed's pydantic refusal of a
    # fractional bucket size (LLaMA-Factory's "auto" with DeepSpeed 0.15: one field of one
    # release pair; its versions are not in the log); libraries' bugs with no frame of
    # the library (FSDP's dtype under LLaMA-Factory) or run from a checkout (LMFlow's
    # src/lmflow); LLaMA-Factory's refusal of a setting, in prose; NCCL's refused
    # connects where fairseq's nodes were each told they were the whole job (no world
    # size given: the log shows only the refusal); torch.distributed.launch's
    # CalledProcessError, the rank's error (mmcv's DDP under torch 1.7) not shown
    "https://github.com/hiyouga/LlamaFactory/issues/5252": None,
    # (LLaMA-Factory#3853's FSDP dtype line reads since phase AD as FSDP's mixed-dtype
    # refusal: its cause, whoever loaded the model in two dtypes)
    "https://github.com/hiyouga/LlamaFactory/issues/3853": "torch.fsdp_mixed_dtype",
    "https://github.com/hiyouga/LlamaFactory/issues/5629": None,
    "https://github.com/OptimalScale/LMFlow/issues/686": "program.exception",
    "https://github.com/facebookresearch/fairseq/issues/1096": "network.peer_connect",
    "https://github.com/open-mmlab/mmcv/issues/636": "launch.subprocess_failed",
    # batch 27, after it was measured (phase X): torch's own bugs (the state dict's load
    # pasted without its exception line; DCP's cuda:{global rank}, which reads as a rank
    # on a GPU its host lacks: the ordinal's advice, which names the global rank); torch's
    # DataParallel device check and accelerate's refusal, each a message with no
    # traceback (the user's device_map); bash's "deepspeed: command not found", in
    # lower-case words the scan does not look for (each such first letter costs the scan
    # of a big log about twice the CPU: bench/explain.md)
    "https://github.com/pytorch/pytorch/issues/136228": None,
    "https://github.com/pytorch/pytorch/issues/95892": "device.invalid_ordinal",
    "https://github.com/huggingface/transformers/issues/21736": None,
    "https://github.com/zai-org/VisualGLM-6B/issues/54": None,
    "https://github.com/modelscope/ms-swift/issues/1538": None,
    # batch 28, after it was measured (phase Y): FastChat's FSDP wrap class (one line,
    # type Exception: no traceback) and trl's example's device_map (a message without
    # type), both the user's; Windows' torch without NCCL seen only as c10d's refused
    # connects; Lightning's bugs: no frame of it, and ranks that each picked their own
    # MASTER_PORT (the connect timed out); torch 2.5's c10d log call that failed every
    # connect (retried); a segfault under gdb
    "https://github.com/lm-sys/FastChat/issues/1235": None,
    "https://github.com/huggingface/trl/issues/722": None,
    "https://github.com/kohya-ss/sd-scripts/issues/317": "rendezvous.unreachable",
    "https://github.com/Lightning-AI/pytorch-lightning/issues/17436": "program.exception",
    "https://github.com/Lightning-AI/pytorch-lightning/issues/2683": "rendezvous.unreachable",
    "https://github.com/pytorch/pytorch/pull/137745": "rendezvous.unreachable",
    "https://github.com/pytorch/pytorch/issues/125990": None,
}


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def _answer(entry, tmp_path, matrix):
    log = tmp_path / "job.log"
    log.write_text(entry["text"], encoding="utf-8")
    return command.explain([str(log)], matrix=matrix)


def _right(entry, result):
    if not result.findings:
        return False
    first = result.findings[0]
    if entry["family"] == "user":
        return (first.signature.id == "program.exception"
                and first.exception.type == entry["exception"])
    if entry["family"] == "library":
        # a library's own bug (batch 19 on): the program's error of the entry's type,
        # raised in (or calling torch from) that library's code, by its import name
        return (first.signature.id == "program.exception"
                and first.exception.type == entry["exception"]
                and first.exception.library == entry["library"])
    return first.signature.id == entry["family"]


def _scored(entries, tmp_path, matrix):
    """The sources explain names right, and (source, family, what it named) of the rest."""
    right, wrong = set(), []
    for entry in entries:
        result = _answer(entry, tmp_path, matrix)
        if _right(entry, result):
            right.add(entry["source"])
        else:
            first = result.findings[0].signature.id if result.findings else None
            wrong.append((entry["source"], entry["family"], first))
    return right, wrong


def _cites_nothing_earlier(batch):
    """A batch's threads: each once, none the corpus or another batch cites."""
    import re
    with open(os.path.join(HERE, "data", "explain_corpus.toml"), encoding="utf-8") as f:
        corpus = f.read()
    earlier = {e["source"] for e in ENTRIES if e.get("batch") != batch}
    cited = set(re.findall(r"https://github\.com/[^\s\"')]+", corpus)) | earlier
    sources = [e["source"] for e in ENTRIES if e.get("batch") == batch]
    assert len(set(sources)) == len(sources)
    assert not set(sources) & cited
    # a repository renamed (volcengine/verl, now verl-project/verl) keeps its threads'
    # numbers: one thread under two owners is one thread
    assert not {_thread(u) for u in sources} & {_thread(u) for u in cited}


def _thread(url):
    """(repository name, number) of a GitHub thread, whoever owns the repository now."""
    import re
    m = re.match(r"https://github\.com/[^/]+/([^/]+)/(?:issues|pull|discussions)/(\d+)", url)
    return (m.group(1).lower(), m.group(2)) if m else url


def test_the_split_is_by_source_and_both_halves_hold_user_code():
    sources = [e["source"] for e in ENTRIES]
    assert len(set(sources)) == len(sources) >= 70
    assert {e["split"] for e in ENTRIES} == {"train", "heldout"}
    assert sum(e["family"] == "user" for e in ENTRIES) >= 10
    assert all(e["family"] in ("user", "library") or "exception" not in e for e in ENTRIES)
    assert all((e["family"] == "library") == ("library" in e) for e in ENTRIES)
    for half in (TRAIN, HELDOUT):
        assert any(e["family"] == "user" for e in half)


@pytest.mark.parametrize("entry", TRAIN, ids=[e["source"].split("//")[-1] for e in TRAIN])
def test_training_log_gets_its_cause(entry, tmp_path, matrix):
    result = _answer(entry, tmp_path, matrix)
    found = [f.signature.id for f in result.findings]
    if entry["source"] in NOT_IN_THE_TEXT:
        best = NOT_IN_THE_TEXT[entry["source"]]
        assert found[:1] == ([best] if best else []), (entry["source"], found)
    else:
        assert _right(entry, result), (entry["source"], found)
    assert int(result.exit_code) == (0 if found else 1)  # 1: no known cause


def test_heldout_logs_get_their_cause(tmp_path, matrix):
    """The figure that counts: the right cause first for at least 90% of the held-out
    logs, and never an environment cause for a log whose cause is the job's code."""
    right, wrong = [], []
    for entry in HELDOUT:
        result = _answer(entry, tmp_path, matrix)
        (right if _right(entry, result) else wrong).append(
            (entry["source"], entry["family"],
             result.findings[0].signature.id if result.findings else None))
    env_for_user = [w for w in wrong if w[1] == "user" and w[2] is not None]
    assert not env_for_user
    assert len(right) / len(HELDOUT) >= 0.9, wrong
    # the logs never used for a rule: as measured, less the four InfiniBand lines written
    # from since (whose misses the measured figure keeps); the two misses left are
    # package versions no signature covers
    assert len(HELDOUT) == MEASURED["heldout"] - len(
        [e for e in WRITTEN_FROM_AFTER if e.get("batch") in FIRST_BATCHES]) == 57
    assert len(right) >= 55, wrong


def test_logs_written_from_after_measuring_were_held_out_and_are_said_so():
    """A log used for a rule after its batch was measured keeps its place in the
    measured figure (as a miss), and is a training log now."""
    assert {e["source"] for e in WRITTEN_FROM_AFTER} == {
        "https://github.com/NVIDIA/nccl/issues/928",
        "https://github.com/pytorch/pytorch/issues/81628",
        "https://github.com/NVIDIA/nccl/issues/902",
        "https://github.com/NVIDIA/nccl/issues/1664",
        # batch 4's three wordings a rule could read, written after it was measured
        "https://github.com/AkariAsai/self-rag/issues/83",
        "https://github.com/2U1/Qwen-VL-Series-Finetune/issues/79",
        "https://github.com/pytorch/gloo/issues/223",
        # phase B: the other four (an order rule, NCCL's interface lines, two wordings
        # whose log does not hold the thread's cause)
        "https://github.com/meta-pytorch/monarch/pull/1571",
        "https://github.com/NVIDIA/nccl/issues/697",
        "https://github.com/NVIDIA/nccl/issues/473",
        "https://github.com/vllm-project/vllm/issues/7896",
    } | set().union(*(missed for batch, missed in WRITTEN_FROM.items() if batch != 4))
    # every miss of a batch written from was written from, and nothing it got right: batch
    # 4 (phases A and B), 5 (C), 6 (D), 7 (E), 8 and 9 (F), 10 (G), 11 (H), 12 (I), 14 (K),
    # 15 (L), 16 (M), 17 (N), 18 (O), 19 (P), 20 (Q), 21 (R), 22 (S), 23 (T), 24 (U)
    for batch, missed in WRITTEN_FROM.items():
        assert {e["source"] for e in WRITTEN_FROM_AFTER if e.get("batch") == batch} == missed
    assert all(e["split"] == "train" and e.get("batch") in (2, 3, *WRITTEN_FROM)
               for e in WRITTEN_FROM_AFTER)


def test_batch4_logs_keep_their_measured_causes(tmp_path, matrix):
    """Batch 4 (collected after the rules were widened from the sources, committed before
    explain first ran on it): every log it got right at that first run stays right, no
    user-code log gets an environment cause, and the figure is the measured 18 of 25."""
    right, wrong = _scored(BATCH4, tmp_path, matrix)
    assert len(BATCH4) == BATCH4_MEASURED["logs"]
    assert all(e["split"] == "heldout" or e.get("heldout_when_measured") for e in BATCH4)
    assert sum(e["family"] == "user" for e in BATCH4) >= 5
    assert not [w for w in wrong if w[1] == "user" and w[2] is not None]
    # improvements are welcome (then say so in docs/explain.md: the figure stays the measured one)
    assert right >= {e["source"] for e in BATCH4} - BATCH4_MISSED, wrong
    assert len(right) >= BATCH4_MEASURED["right"]
    # the misses written from since: each gets its cause now, or, where the log does not
    # show the thread's cause, the best its text allows (NOT_IN_THE_TEXT); these are
    # training results, not a held-out figure
    assert right >= BATCH4_MISSED - set(NOT_IN_THE_TEXT), wrong
    assert {w[0] for w in wrong} <= set(NOT_IN_THE_TEXT), wrong


def test_batch4_cites_no_thread_of_the_corpus_or_earlier_batches():
    _cites_nothing_earlier(4)


# Batch 5, measured once (c4d6223, the rules of phase B, 377c40a): 22 of 30, and that
# figure stays. Five of the eight misses were causes no signature named (a family
# `new.*`, kept as family_when_measured); three were families that have one, in a wording
# no rule read. Rules were written from all eight after the measurement (phase C), so
# they are training logs now, with the new signature as their family.
BATCH5_MEASURED = {"logs": 30, "right": 22}
BATCH5_MISSED = {
    "https://github.com/pytorch/pytorch/issues/11683",  # torch 0.4's pickling wording
    "https://github.com/Azure/azhpc-images/issues/327",  # new: NCCL topology file
    "https://github.com/01-ai/Yi/pull/69",  # new: --local_rank vs --local-rank
    "https://github.com/msr-fiddle/pipedream/issues/32",  # hostname; named gloo's interface
    "https://github.com/aws-samples/aws-do-eks/pull/50",  # hostname; nothing read
    "https://github.com/NVIDIA/nccl/issues/1612",  # new: a stray bootstrap connection
    "https://github.com/pytorch/pytorch/issues/13369",  # new: a torch without distributed
    "https://github.com/facebookresearch/fairchem/issues/206",  # new: the same, Windows
}


def test_batch5_logs_keep_their_measured_causes(tmp_path, matrix):
    """Batch 5 (collected after phase B by someone who read no rule, committed with its
    causes before explain first ran on it): every log it got right at that first run
    stays right, no user-code log gets an environment cause, the figure is the measured
    22 of 30."""
    right, wrong = _scored(BATCH5, tmp_path, matrix)
    assert len(BATCH5) == BATCH5_MEASURED["logs"]
    assert all(e["split"] == "heldout" or e.get("heldout_when_measured") for e in BATCH5)
    assert {e["source"] for e in BATCH5 if e.get("family_when_measured", "").startswith(
        "new.")} == BATCH5_MISSED - {
        "https://github.com/pytorch/pytorch/issues/11683",
        "https://github.com/msr-fiddle/pipedream/issues/32",
        "https://github.com/aws-samples/aws-do-eks/pull/50"}
    assert sum(e["family"] == "user" for e in BATCH5) >= 7
    assert not [w for w in wrong if w[1] == "user" and w[2] is not None]
    # improvements are welcome (then say so in docs/explain.md: the figure stays the measured one)
    assert right >= {e["source"] for e in BATCH5} - BATCH5_MISSED, wrong
    assert len(right) >= BATCH5_MEASURED["right"]
    # the misses written from since (phase C): each gets its cause now (every one's log
    # shows it); these are training results, not a held-out figure
    assert right >= BATCH5_MISSED, wrong


def test_batch5_cites_no_thread_of_the_corpus_or_earlier_batches():
    _cites_nothing_earlier(5)


# Batch 6, measured once (cb122fa, the rules of phase C, e5064cd): 6 of 10, and that
# figure stays. One of the four misses was a cause no signature named (a family `new.*`,
# kept as family_when_measured); three were families that have one, in wordings no rule
# read (NCCL's INFO lines only, twice; DeepSpeed's launcher's return code on a line of its
# own). Rules were written from all four after the measurement (phase D), so they are
# training logs now, with the new signature as their family.
BATCH6_MEASURED = {"logs": 10, "right": 6}
BATCH6_MISSED = {
    "https://github.com/NVIDIA/nccl/issues/257",  # P2P hang: NCCL's INFO lines only
    "https://github.com/NVIDIA/nccl/issues/1000",  # a peer connect, in a wording no rule reads
    "https://github.com/zhijian-liu/torchpack/issues/36",  # new: MPICH for Open MPI
    "https://github.com/CASIA-LMC-Lab/AnomalyGPT/issues/43",  # OOM killer; a wording no rule reads
}


def test_batch6_logs_keep_their_measured_causes(tmp_path, matrix):
    """Batch 6 (collected after phase C, committed with its causes before explain first
    ran on it): every log it got right at that first run stays right, no user-code log
    gets an environment cause, the figure is the measured 6 of 10."""
    right, wrong = _scored(BATCH6, tmp_path, matrix)
    assert len(BATCH6) == BATCH6_MEASURED["logs"]
    assert all(e["split"] == "heldout" or e.get("heldout_when_measured") for e in BATCH6)
    assert {e["source"] for e in BATCH6 if e.get("family_when_measured", "").startswith(
        "new.")} == {"https://github.com/zhijian-liu/torchpack/issues/36"}
    assert sum(e["family"] == "user" for e in BATCH6) >= 1
    assert not [w for w in wrong if w[1] == "user" and w[2] is not None]
    # improvements are welcome (then say so in docs/explain.md: the figure stays the measured one)
    assert right >= {e["source"] for e in BATCH6} - BATCH6_MISSED, wrong
    assert len(right) >= BATCH6_MEASURED["right"]
    # the misses written from since (phase D): each gets its cause now (two of them only
    # as a guess worded as one, from NCCL's INFO lines); these are training results, not a
    # held-out figure
    assert right >= BATCH6_MISSED, wrong


def test_batch6_cites_no_thread_of_the_corpus_or_earlier_batches():
    _cites_nothing_earlier(6)


# Batch 7, measured once (646c3ec, the rules of phase D, 1f5939a): 14 of 16, and that
# figure stays. All 6 user-code logs got the program's error. The two misses: a line of
# torch's own source in a traceback, where the message is split into two string literals
# ("Distributed package doesn't have NCCL " "built in"), which no rule read; and a
# rendezvous whose connect timed out, which explain names as unreachable, where the thread
# found the host's own name missing from /etc/hosts (the log does not say so). Phase E
# wrote from both after the measurement, so they are training logs now: whisper-vits-svc#97
# gets its cause (torch's source line is read), pytorch#67547 the best its text allows
# (NOT_IN_THE_TEXT: the connect failed, not why).
BATCH7_MEASURED = {"logs": 16, "right": 14}
BATCH7_MISSED = {
    "https://github.com/PlayVoice/whisper-vits-svc/issues/97",  # torch's source line only
    "https://github.com/pytorch/pytorch/issues/67547",  # the log says unreachable, not why
}


def test_batch7_logs_keep_their_measured_causes(tmp_path, matrix):
    """Batch 7 (collected after phase D, committed with its causes before explain first
    ran on it): every log it got right at that first run stays right, no user-code log
    gets an environment cause, the figure is the measured 14 of 16."""
    right, wrong = _scored(BATCH7, tmp_path, matrix)
    assert len(BATCH7) == BATCH7_MEASURED["logs"]
    assert all(e["split"] == "heldout" or e.get("heldout_when_measured") for e in BATCH7)
    assert not [w for w in wrong if w[1] == "user" and w[2] is not None]
    assert {e["source"] for e in BATCH7 if e["family"] == "user"} <= right
    # improvements are welcome (then say so in docs/explain.md: the figure stays the measured one)
    assert right >= {e["source"] for e in BATCH7} - BATCH7_MISSED, wrong
    assert len(right) >= BATCH7_MEASURED["right"]
    # the misses written from since (phase E): each gets its cause now, or, where the log
    # does not show the thread's cause, the best its text allows (NOT_IN_THE_TEXT); these
    # are training results, not a held-out figure
    assert right >= BATCH7_MISSED - set(NOT_IN_THE_TEXT), wrong
    assert {w[0] for w in wrong} <= set(NOT_IN_THE_TEXT), wrong


def test_batch7_cites_no_thread_of_the_corpus_or_earlier_batches():
    assert len(BATCH7) == 16 and sum(e["family"] == "user" for e in BATCH7) == 6
    assert all(e["split"] == "heldout" or e["source"] in BATCH7_MISSED for e in BATCH7)
    _cites_nothing_earlier(7)


# Batch 8, measured once on phase D's rules (4e1aa53; phase E, written meanwhile from
# batch 7's misses and the sources, was not merged yet): 10 of 12. Its two misses: NCCL's
# shm_open "Permission denied" on /dev/shm, a cause no signature named (`new.*`; explain
# said /dev/shm is full, its nearest family); and a Lightning log whose two ranks'
# lines are interleaved, the error line joined to the user's code (no finding: not an
# environment cause either). Phase F wrote from both after the measurement, so they are
# training logs now: pytorch#37004 gets the new nccl.shm_permission (NCCL's shm_open and
# shared-memory errors with EACCES, EPERM or EROFS), Lightning#5641 the program's
# RuntimeError (torch's 'Tensors must be CUDA and dense' judges the tensor the program
# passed).
BATCH8_MISSED = {
    "https://github.com/pytorch/pytorch/issues/37004",  # new: /dev/shm not writable
    "https://github.com/Lightning-AI/pytorch-lightning/issues/5641",  # interleaved ranks
}




# Batch 9, measured once on phase D's rules (d8305b8) and once on phase E's (the merge of
# phase E, which never held it): 6 of 15 both times. Four of its nine misses are causes no
# signature names (`new.*`: NVLS multicast on a broken NVSwitch fabric, a Lightning bug in
# its MPI environment, a launcher flag given a value, reentrant checkpointing under DDP);
# two hold only NCCL's "unhandled system error" (a docker bridge, a small /dev/shm: the
# cause is in the thread, not the log); three are logs mangled as posted (two ranks'
# lines interleaved twice, a traceback pasted in reverse) where explain found no first
# error or another exception text. No user-code log got an environment cause. Phase F wrote
# from all nine after the measurement, so they are training logs now: the four `new.*`
# get new signatures (their family now, the measured one kept as family_when_measured),
# the three mangled logs their cause through the structure's reading of two ranks' mixed
# writes and of a reversed traceback, and the two 'unhandled system error' logs the best
# their text allows (NOT_IN_THE_TEXT).
BATCH9_MISSED = {
    "https://github.com/deepinsight/insightface/issues/1444",  # only 'unhandled system error'
    "https://github.com/HRNet/DEKR/issues/18",  # only 'unhandled system error'
    "https://github.com/pytorch/pytorch/pull/177472",  # new: NVLS on a broken fabric
    "https://github.com/Lightning-AI/pytorch-lightning/issues/19062",  # new: a Lightning bug
    "https://github.com/huggingface/accelerate/issues/2240",  # new: a flag given a value
    "https://github.com/lucidrains/magvit2-pytorch/issues/22",  # interleaved ranks
    "https://github.com/modelscope/ms-swift/issues/3171",  # new: reentrant checkpointing
    "https://github.com/Theodore-PKU/MC-DDPM/issues/1",  # a traceback pasted in reverse
    "https://github.com/huggingface/accelerate/issues/1263",  # interleaved ranks
}




# Batch 10, measured once on phase E's rules (5bad0fd's, the folded scan) and once on
# phase F's (the merge 1a4458c; phase F was written in a worktree that never held batch
# 10): 23 of 27 on phase E, **24 of 27 on phase F**. Phase F's extra hit is
# pytorch/examples#1030 ("Tensors must be CUDA and dense", torch's check of what the
# program passed, which phase F made the program's error from batch 8's Lightning#5641).
# The three misses: NCCL's own SIGBUS backtrace of a small /dev/shm ("Caught signal 7
# (Bus error"; explain named torchrun's summary), torch's refusal of a 2-D FSDP2+TP
# state_dict in one nightly (`new.*`), and SpeechBrain's own parser refusing the
# `--local-rank` torch.distributed.launch passes (its KeyError, not argparse's words).
# No user-code log got an environment cause. Phase G wrote from all three after the
# measurement, so they are training logs now: pipedream#76 gets nccl.shm_full (a crash
# handler's SIGBUS report whose frames are NCCL's), torchtitan#441 the new
# torch.release_lacks_feature (its family now, the measured one kept as
# family_when_measured), speechbrain#2868 launch.local_rank_argument (HyperPyYAML's
# override refused, with the other parsers' refusals of the launcher's argument).
BATCH10_MISSED = {
    "https://github.com/msr-fiddle/pipedream/issues/76",  # NCCL's SIGBUS backtrace
    "https://github.com/pytorch/torchtitan/issues/441",  # new: 2-D state_dict refused
    "https://github.com/speechbrain/speechbrain/issues/2868",  # the launcher's --local-rank
}




# Batch 11, measured once on phase F's rules (the merge 1a4458c, with batch 10's
# bookkeeping) and once on phase G's (the merge of phase G, which was written in a
# worktree that never held batch 11): 19 of 23 both times. Its four misses: DDP's own list
# of the parameters that got no gradient ("Parameters which did not receive grad for rank
# N", reducer.cpp: a wording no rule reads), a torch 1.x C++ assertion whose message is
# followed by the C++ backtrace's "frame #N" lines (the program's error, unread), FSDP's
# refusal of offload_to_cpu with NO_SHARD on a single GPU (`new.*`), and an older
# torchrun refusing the hyphenated --nproc-per-node (`new.*`). Phase H wrote from all
# four after the measurement, so they are training logs now: imagen-pytorch#75 gets
# torch.ddp_unused_parameters (DDP's lists of the parameters without a gradient, read on
# their own), DCT_ICCV-2019#3 the program's RuntimeError (a C++ error's place in torch's
# source tree is not the environment; torch's refusal of a DDP module without trainable
# parameters said in words), LLaMA2-Accessory#76 the new torch.fsdp_no_shard_offload and
# pytorch-image-models#1742 the new launch.torchrun_option_unknown (their family now, the
# measured one kept as family_when_measured).
BATCH11_MISSED = {
    "https://github.com/lucidrains/imagen-pytorch/issues/75",  # DDP's list of gradless params
    "https://github.com/penincillin/DCT_ICCV-2019/issues/3",  # C++ frames after the message
    "https://github.com/Alpha-VLLM/LLaMA2-Accessory/issues/76",  # new: FSDP NO_SHARD offload
    "https://github.com/huggingface/pytorch-image-models/issues/1742",  # new: torchrun spelling
}




# Batch 12, measured once on phase G's rules (06e79a9) and once on phase H's (the merge
# of phase H, written in a worktree that never held batch 12): 12 of 16 both times. Its
# four misses: three causes no signature names (`new.*`: transformers' Trainer deleting
# one checkpoint from every process of a multi-node job on a shared filesystem, FSDP's
# FlatParameter refusing mixed requires_grad, a launch script whose comment inside a
# backslash-continued command cut the arguments off), and ranks out of step whose log
# holds only the watchdog's timeouts (different SeqNums on two ranks; explain named the
# timeout, the thread's cause is the collective mismatch behind it). Phase I wrote from
# all four after the measurement, so they are training logs now: mmsegmentation#2137 gets
# torch.collective_mismatch (two ranks' watchdog timeouts at different SeqNums on one
# process group), LLaVA#52 the new torch.fsdp_mixed_requires_grad (its family now, the
# measured one kept as family_when_measured); transformers#20988 and Bunny#46 the best
# their text allows (NOT_IN_THE_TEXT: the program's FileNotFoundError, and no finding).
BATCH12_MISSED = {
    "https://github.com/open-mmlab/mmsegmentation/issues/2137",  # out of step: timeouts only
    "https://github.com/huggingface/transformers/issues/20988",  # new: a checkpoint cleanup race
    "https://github.com/haotian-liu/LLaVA/issues/52",  # new: FSDP's uniform requires_grad
    "https://github.com/BAAI-DCAI/Bunny/issues/46",  # new: a launch command cut by a comment
}

# Batch 13, measured once on phase H's rules (d3d131b) and once on phase I's (the merge of
# phase I, written in a worktree that never held batch 13): 4 of 4 both times. Four logs
# only (its collectors' search budget ran out): too few to say much alone. One is a
# family phase H added from batch 11's miss (torch.distributed.launch of torch 1.6
# refusing --rdzv_endpoint, `launch.torchrun_option_unknown`).
BATCH13_MISSED = set()

# Batch 14 (32 logs, 10 of user code), collected after phase I by four people who read no
# rule, committed with its causes (3f60fc4) before explain first ran on it; measured once
# on phase I's rules (3f60fc4): 19 of 32, and once on phase J's (the merge a38919e;
# phase J, written from the sources of compiled extensions' failures in a worktree that
# never held batch 14): 19 of 32, the same thirteen misses. Eight are causes no signature
# named (`new.*`: five a framework's own bug, fixed in DeepSpeed, torchtitan, verl or
# transformers), five known causes in a wording or a log too short for any rule. Phase K
# wrote from all thirteen after the measurement, so they are training logs now: four get
# their cause from a widened signature (NCCL's 'named symbol not found' is
# cuda.no_kernel_image; torch 1.0 previews' barrier refusal torch.release_lacks_feature;
# FSDP2's deepcopy refusal torch.pickle_process_group; Lightning's wording of the unused
# parameters torch.ddp_unused_parameters), three a new one (their family now, the measured
# one kept as family_when_measured: env.package_version read from the traceback's frames,
# host.command_missing, launch.nproc_per_node_invalid); fairseq#2924 and the five
# frameworks' bugs the best their text allows (NOT_IN_THE_TEXT).
BATCH14_MISSED = {
    "https://github.com/pytorch/pytorch/issues/152077",  # NCCL's 'named symbol not found'
    "https://github.com/pytorch/pytorch/issues/17848",  # 1.0 preview's barrier refusal
    "https://github.com/facebookresearch/fairseq/issues/2924",  # duplicate GPU: invalid usage only
    "https://github.com/hao-ai-lab/FastVideo/issues/915",  # FSDP2's deepcopy refusal
    "https://github.com/p0p4k/pflowtts_pytorch/issues/8",  # Lightning's unused-parameters words
    "https://github.com/huggingface/transformers/issues/10666",  # new: a framework's bug, no rule
    "https://github.com/verl-project/verl/pull/4799",  # new: a framework's bug, no rule
    "https://github.com/deepspeedai/DeepSpeed/pull/7585",  # new: a framework's bug, no rule
    "https://github.com/pytorch/torchtitan/pull/1465",  # new: a framework's bug, no rule
    "https://github.com/deepspeedai/DeepSpeed/pull/7869",  # new: a framework's bug, no rule
    "https://github.com/deepspeedai/DeepSpeed/pull/4985",  # new: env.package_version
    "https://github.com/Lightning-AI/pytorch-lightning/pull/6002",  # new: host.command_missing
    "https://github.com/zcablii/LSKNet/issues/112",  # new: launch.nproc_per_node_invalid
}

# Batch 15 (22 logs, 7 of user code), collected after phase J by three people who read no
# rule, committed with its causes (e5a1067) before explain first ran on it; measured once
# on phase J's rules (e5a1067): 12 of 22, and once on phase K's (the merge 92b7eba; phase
# K, written from batch 14's misses in a worktree that never held batch 15): 12 of 22, the
# same ten misses. Six are causes no signature names (`new.*`), two known causes in a log
# that does not show them or a wording no rule reads, two user-code logs: one whose
# traceback is followed by torch.distributed.launch's CalledProcessError, read as the
# program's error in its place, one whose two ranks' tracebacks are mixed in every line.
# Phase L wrote from all ten after the measurement, so they are training logs now:
# fairseq#3237 gets the program's TypeError (torch's refusal of a GPU tensor given to
# NumPy is the program's, though its words name CUDA; torch.distributed.launch's
# CalledProcessError, raised in launch.py's own frame, is the new launch.subprocess_failed,
# a summary like torchrun's), contrastors#15 the program's AttributeError (a built-in
# type glued to another rank's source line, its message on the next line); four a new
# signature (their family now, the measured one kept as family_when_measured:
# host.fork_memory read from the frames where CPython forks, rendezvous.ipv6_unbracketed
# from urllib's port under torch's rendezvous, checkpoint.corrupt, and
# launch.deepspeed_include_slot); SkyRL#1761, LlamaFactory#6075, OpenRLHF#536 and
# verl#5548 the best their text allows (NOT_IN_THE_TEXT).
BATCH15_MISSED = {
    "https://github.com/NovaSky-AI/SkyRL/pull/1761",  # OOM: NCCL's unhandled cuda error only
    "https://github.com/hiyouga/LlamaFactory/issues/6075",  # argparse's required arguments only
    "https://github.com/facebookresearch/fairseq/pull/3237",  # user: launch.py's CalledProcessError
    "https://github.com/nomic-ai/contrastors/issues/15",  # user: a type glued to a source line
    "https://github.com/OpenRLHF/OpenRLHF/pull/536",  # new: Ray's ROCR_VISIBLE_DEVICES, no rule
    "https://github.com/NovaSky-AI/SkyRL/pull/357",  # new: host.fork_memory
    "https://github.com/NovaSky-AI/SkyRL/pull/612",  # new: rendezvous.ipv6_unbracketed
    "https://github.com/verl-project/verl/pull/5548",  # new: MLflow's expired token, no rule
    "https://github.com/deepspeedai/DeepSpeed/issues/5818",  # new: launch.deepspeed_include_slot
    "https://github.com/DLLXW/baby-llama2-chinese/pull/56",  # new: checkpoint.corrupt
}

# Batch 16 (25 logs, 7 of user code), collected after phase K by three people who read no
# rule, committed with its causes (1c5b6c6) before explain first ran on it; measured once
# on phase K's rules (1c5b6c6): 12 of 25, and once on phase L's (the merge f487083; phase
# L, written from batch 15's misses in a worktree that never held batch 16): 12 of 25,
# the same thirteen misses. Six are causes no signature names (`new.*`), seven known
# causes (two of them env.package_version, phase K's) in a wording no rule reads or a log
# that does not show them. Every user-code log got the program's error.
# Phase M wrote from all thirteen after the measurement, so they are training logs now:
# prime-rl#2800 gets torch.dcp_missing_key (the message ending with its colon, the key on
# the next line), verl#575 cuda.out_of_memory (vLLM's CuMem allocator's 'CUDA Error: out
# of memory at FILE:LINE'), torchtitan#2888 and accelerate#1199 env.package_version (an
# installed package importing a name torch's module lacks; accelerate's own refusal of
# the installed torch), instructlab#678 the new torch.fsdp_hybrid_shard_devices (its
# family now, the measured one kept as family_when_measured: new_subgroups' refusal
# called from FSDP's _init_intra_node_process_group); the other eight the best their
# text allows (NOT_IN_THE_TEXT): torch.release_lacks_feature's keyword table reads a
# call whose source line names torch's API, which neither of its two logs shows.
BATCH16_MISSED = {
    "https://github.com/PrimeIntellect-ai/prime-rl/pull/2800",  # DCP missing key, key below
    "https://github.com/volcengine/verl/pull/575",  # OOM: vLLM's cumem_allocator.cpp
    "https://github.com/yiqiao-yin/deepspeed-course/pull/17",  # duplicate GPU: a timeout only
    "https://github.com/yiqiao-yin/deepspeed-course/pull/19",  # barrier(timeout=): no frame
    "https://github.com/tianweiy/CenterPoint/issues/59",  # DDP's keyword: the callee not shown
    "https://github.com/pytorch/torchtitan/pull/2888",  # package versions: torch's ImportError
    "https://github.com/huggingface/accelerate/issues/1199",  # package versions: its refusal
    "https://github.com/NVIDIA-NeMo/Speech/issues/13996",  # new: NCCL's topology check, no rule
    "https://github.com/mila-iqia/milabench/issues/183",  # new: NCCL's topology check, no rule
    "https://github.com/instructlab/training/issues/678",  # new: torch.fsdp_hybrid_shard_devices
    "https://github.com/NVIDIA/TransformerEngine/pull/1031",  # new: a segfault's summary, no rule
    "https://github.com/deepspeedai/DeepSpeed/pull/4962",  # new: DeepSpeed's recursion, no rule
    "https://github.com/OpenRLHF/OpenRLHF/pull/524",  # new: Ray's ROCR_VISIBLE_DEVICES, no rule
}

# Batch 17 (25 logs, 9 of user code), collected after phase L by three people who read no
# rule, committed with its causes (ac06478) before explain first ran on it; measured once
# on phase L's rules (ac06478): 12 of 25, and once on phase M's (the merge 8fe1156; phase
# M, written from batch 16's misses in a worktree that never held batch 17): 12 of 25,
# the same thirteen misses. Twelve are causes no signature names (`new.*`: frameworks'
# and NCCL's own bugs, a launcher's, a scheduler's and a filesystem's refusals), one a
# known cause in a wording no rule reads. Every user-code log got the program's error.
# Phase N wrote from all thirteen after the measurement, so they are training logs now:
# apex#515 gets checkpoint.corrupt (the legacy reader's 'storage has wrong size'); seven a
# new signature (their family now, the measured one kept as family_when_measured:
# nccl.release_bug for nccl#957 and #1185, read from the WARN's file and line, which exist
# with that call only in the releases with the bug; nccl.foreign_connection, a magic of
# text; env.package_incomplete, an installed package importing its own missing module;
# launch.slurm_gres_refused; launch.deepspeed_export_unquoted; host.filesystem_unsupported;
# cuda.ipc_expandable_segments); three the program's error, now with what torch's or
# transformers' words mean (their family now user: a CPU tensor in a collective of an
# NCCL-only group, the same text as batches 7 and 16's user-code logs; transformers'
# refusal without trust_remote_code, a path naming NVIDIA no longer read as the
# environment's); DeepSpeed#5106 the best its text allows (NOT_IN_THE_TEXT).
BATCH17_MISSED = {
    "https://github.com/NVIDIA/apex/issues/515",  # corrupt checkpoint: 'storage has wrong size'
    "https://github.com/sgl-project/sglang/pull/5322",  # new: a CPU tensor on NCCL, user now
    "https://github.com/huggingface/lerobot/issues/3127",  # new: a CPU tensor on NCCL, user now
    "https://github.com/NVIDIA/nccl/issues/957",  # new: nccl.release_bug (transport.cc:154)
    "https://github.com/NVIDIA/nccl/issues/1185",  # new: nccl.release_bug (ipcsocket.cc:57)
    "https://github.com/NVIDIA/nccl/issues/1808",  # new: nccl.foreign_connection
    "https://github.com/deepspeedai/DeepSpeed/pull/7591",  # new: env.package_incomplete
    "https://github.com/verl-project/verl/pull/5200",  # new: trust_remote_code, user now
    "https://github.com/meta-pytorch/torchx/pull/1100",  # new: launch.slurm_gres_refused
    "https://github.com/deepspeedai/DeepSpeed/pull/5878",  # new: launch.deepspeed_export_unquoted
    "https://github.com/huggingface/pytorch-image-models/issues/340",  # new: filesystem, no links
    "https://github.com/NovaSky-AI/SkyRL/pull/1960",  # new: cuda.ipc_expandable_segments
    "https://github.com/deepspeedai/DeepSpeed/pull/5106",  # new: an unflushed file, no rule
}

# Batch 18, measured once (b40c2ae, the rules of phase M at a862aeb): 10 of 25, and that
# figure stays; the same 10 on phase N's merge (259350c). Twelve of its fifteen misses
# are causes no signature names (frameworks' own bugs: DeepSpeed, Megatron in verl, SkyRL,
# oumi, dmlcloud, itwinai; torch.load's map_location in an example; BatchNorm buffers
# modified in place under DDP); one user-code log, three ranks' lines glued, got the
# program's error under the type 'AttributeErrorAttributeErrorAttributeError'.
BATCH18_MISSED = {
    "https://github.com/kemaloksuz/aLRPLoss/issues/6",  # nproc_per_node, one line: no finding
    "https://github.com/deepspeedai/DeepSpeed/pull/7636",  # new: ZeRO-2 bucket dtype
    "https://github.com/deepspeedai/DeepSpeed/pull/5477",  # new: pipeline tied grad None
    "https://github.com/Project-MONAI/GenerativeModels/issues/352",  # new: BatchNorm in place
    "https://github.com/sehoffmann/dmlcloud/issues/39",  # new: SLURM_TASKS_PER_NODE '1(x2)'
    "https://github.com/interTwin-eu/itwinai/issues/481",  # new: an allocation taken for a job
    "https://github.com/pytorch/elastic/issues/134",  # nccl.remote_error read as system_error
    "https://github.com/deepspeedai/DeepSpeed/issues/3810",  # new: ZeRO checkpoint world size
    "https://github.com/oumi-ai/oumi/pull/835",  # new: FSDP optimizer state, mixed dtypes
    "https://github.com/NovaSky-AI/SkyRL/pull/554",  # new: DeviceMesh.get_group on 2-D
    "https://github.com/pytorch/examples/pull/629",  # new: torch.load without map_location
    "https://github.com/verl-project/verl/pull/5782",  # new: Megatron save, no param buffer
    "https://github.com/deepspeedai/DeepSpeed/pull/5767",  # new: BF16 optimizer without state
    "https://github.com/deepspeedai/DeepSpeed/pull/7649",  # new: Ulysses mpu checkpoint
    "https://github.com/mlfoundations/open_lm/pull/234",  # user: three ranks' types glued
}

# Batch 19, measured once (88cae8e, the rules of phase O at 6409a15): 10 of 21, and that
# figure stays; 8 of 21 on phase N's rules (dcb097d), which name no library. Its family
# `library` (a bug of a library the job imports, fixed there) was defined in the
# collectors' brief before any log was collected: 9 logs, 2 right (megatron's and
# transformers' own code named); the others show no frame of the library (one line, a
# sentence, a traceback cut before its last frame) or an argparse refusal.
BATCH19_MISSED = {
    "https://github.com/Lightning-AI/pytorch-lightning/issues/8139",  # library: NCCL's words only
    "https://github.com/deepspeedai/DeepSpeed/issues/3411",  # nvcc's missing header: nothing
    "https://github.com/huggingface/trl/pull/825",  # library: its frame cut off, no library
    "https://github.com/aws-samples/aws-do-eks/pull/51",  # gloo's enforce of '^lo': nothing
    "https://github.com/EleutherAI/gpt-neox/issues/849",  # user, read as the port in use
    "https://github.com/deepspeedai/DeepSpeed/pull/5318",  # library: a sentence, nothing
    "https://github.com/huggingface/accelerate/issues/18",  # library: argparse's refusal
    "https://github.com/OpenRLHF/OpenRLHF/issues/101",  # library: no frame, no library
    "https://github.com/MiniMax-AI/MiniMax-01/issues/42",  # shm: NCCL's system error only
    "https://github.com/meta-pytorch/torchtune/issues/2561",  # library: one line, no frame
    "https://github.com/PrimeIntellect-ai/prime-rl/pull/1678",  # library: ranks' lines only
}
# Batch 20, measured once (25e7287, the rules of phase P at a4a2ab8): 5 of 14, and that
# figure stays; the same 5 on phase O's rules (5e1dcea). Both user-code logs got the
# program's error; of 3 library bugs 1 right (dlrover's fix read as Megatron's code, the
# frame the log shows last; accelerate's bug only quoted in a sentence); 4 `new.*`.
BATCH20_MISSED = {
    "https://github.com/intelligent-machine-learning/dlrover/issues/977",  # library: megatron named
    "https://github.com/huggingface/trl/issues/2329",  # library: a sentence, nothing
    "https://github.com/vllm-project/vllm/issues/19613",  # new: NCCL_BUFFSIZE too large
    "https://github.com/NVIDIA-NeMo/Run/issues/266",  # release bug: 'Could not find NET' alone
    "https://github.com/Haochen-Wang409/ross/issues/13",  # new: resume after save_only_model
    "https://github.com/hiyouga/LlamaFactory/issues/5497",  # new: the same, its own words
    "https://github.com/JingyunLiang/VRT/issues/22",  # release lacks _set_static_graph: nothing
    "https://github.com/bytedance/HLLM/issues/30",  # new: a checkpoint dir on one node's disk
    "https://github.com/modelscope/ms-swift/issues/9912",  # package version: a TypeError
}

# Batch 21, measured once (31504c1, the rules of phase Q at 88770f8): 3 of 10, and that
# figure stays; 2 of 10 on phase P's rules (1ff36a9): phase Q's resume signature, written
# from batch 20, named Video-LLaVA#42's cause. No user-code log; both library bugs got
# the program's error of their type with no frame of the library fixed.
BATCH21_MISSED = {
    "https://github.com/hpcaitech/Open-Sora/issues/28",  # pickling: traceback cut, nothing
    "https://github.com/deepspeedai/DeepSpeed/issues/5627",  # ninja: cut before its words
    "https://github.com/ray-project/ray/issues/44204",  # library: two lines, no library
    "https://github.com/NVIDIA/Megatron-LM/issues/878",  # /dev/shm: ENOSPC read as the disk
    "https://github.com/LianjiaTech/BELLE/issues/136",  # shm: NCCL's system error alone
    "https://github.com/meta-pytorch/data/issues/1142",  # peer connect: cut, nothing
    "https://github.com/deepspeedai/DeepSpeed/pull/4434",  # library: its frame's line cut
}

# Batch 22, measured once (d99c5b9, the rules of phase R at 45b287e): 8 of 15, and that
# figure stays; the same 8 on phase Q's rules (88770f8). Its user-code log got the
# program's error of its type; of five library bugs one named its library (coati), three
# show no frame of the library that was fixed, one is cut before its error line.
BATCH22_MISSED = {
    "https://github.com/karpathy/nanoGPT/pull/55",  # IB unusable: NCCL's teardown alone
    "https://github.com/vllm-project/vllm/issues/9920",  # P2P/ACS: a hang, no error line
    "https://github.com/Lightning-AI/pytorch-lightning/issues/2407",  # library: its set_device, read as the ordinal
    "https://github.com/Lightning-AI/pytorch-lightning/issues/7282",  # library: no frame of it
    "https://github.com/Lightning-AI/pytorch-lightning/issues/16758",  # library: the job's frames only
    "https://github.com/hpcaitech/ColossalAI/issues/3355",  # library: cut before its error line
    "https://github.com/huggingface/trl/issues/4782",  # reentrant checkpoint: cut before it
}

# Batch 23, measured once (0ab6940, the rules of phase S at e053caf): 10 of 23, and that
# figure stays; the same 10 on phase R's rules (ce47260). Its three user-code logs got
# the program's error of their type; of six library bugs two named their library
# (DeepSpeed's launcher, mmcv), two show no frame of it, two no error line.
BATCH23_MISSED = {
    "https://github.com/vllm-project/vllm/issues/3688",  # NCCL 2.18.1's bug: read as CUDA's
    "https://github.com/hpcaitech/ColossalAI/issues/2407",  # gloo's refused connect, broken line
    "https://github.com/OpenRLHF/OpenRLHF/pull/462",  # library: Ray's wrapper, no error line
    "https://github.com/spark-arena/sparkrun/issues/275",  # gloo's interface: read as the program's
    "https://github.com/NovaSearch-Team/RAG-Retrieval/issues/50",  # accelerate's port in use
    "https://github.com/deepspeedai/DeepSpeed/pull/1879",  # library: an undefined symbol
    "https://github.com/deepspeedai/DeepSpeed/issues/5659",  # ld: cannot find -lcurand
    "https://github.com/henrywoo/pyllama/issues/25",  # no checkpoint shard found: new
    "https://github.com/huggingface/trl/issues/3012",  # library: no frame of trl
    "https://github.com/thu-coai/EVA/issues/10",  # DeepSpeed's release: its AttributeError
    "https://github.com/yunxiangfu2001/SegMAN/issues/11",  # mmcv against torch: AttributeError
    "https://github.com/axolotl-ai-cloud/axolotl/pull/148",  # library: no frame of axolotl
    "https://github.com/meta-llama/llama/issues/415",  # fewer ranks than shards: new
}

# Batch 24, measured once (f088222, the rules of phase T at 4325aa3): 2 of 5, and that
# figure stays; the same 2 on phase S's rules (1423c5c). Its user-code log got the
# program's error of its type; TransformerEngine's bug named its library. Phase U is
# written from its misses: NCCL's connect to a loopback address is a rule; the other two
# logs do not show their cause (NOT_IN_THE_TEXT).
BATCH24_MISSED = {
    "https://github.com/awslabs/awsome-distributed-ai/issues/192",  # NCCL's connect to 127.0.0.1
    "https://github.com/hpcaitech/ColossalAI/issues/2439",  # ordinal: cut before its error line
    "https://github.com/yoshitomo-matsubara/torchdistill/issues/122",  # library: a checkout of it
}

# Batch 25, measured once (77d5e8d, the rules of phase U with session 21's reading of
# logs across hosts): 6 of 12, and that figure stays. Both its user-code logs got no
# environment cause (one the program's error of its type, one nothing: torch's message
# without its type).
BATCH25_MISSED = {
    "https://github.com/QwenLM/Qwen/issues/1125",  # nvcc's unsupported arch: new
    "https://github.com/hiyouga/LlamaFactory/issues/140",  # user: a message without its type
    "https://github.com/huggingface/accelerate/issues/3923",  # library: no frame of it
    "https://github.com/hiyouga/LlamaFactory/issues/3634",  # library: cut in deepspeed's frame
    "https://github.com/hiyouga/LlamaFactory/issues/2189",  # library: no exception line
    "https://github.com/facebookresearch/dino/issues/88",  # no launcher: AttributeError
}

# Batch 26, measured once (425666d, the rules of phase V): 2 of 10, and that figure
# stays. Its user-code log got the program's error of its type.
BATCH26_MISSED = {
    "https://github.com/hiyouga/LlamaFactory/issues/5252",  # DeepSpeed's config: pydantic
    "https://github.com/hiyouga/LlamaFactory/issues/3853",  # library: no frame of it
    "https://github.com/hiyouga/LlamaFactory/issues/5629",  # a framework's refusal: new
    "https://github.com/OptimalScale/LMFlow/issues/686",  # library: a checkout of it
    "https://github.com/pytorch/ignite/issues/1710",  # no nvcc where DeepSpeed looks
    "https://github.com/Xirider/finetune-gpt2xl/issues/1",  # DeepSpeed's older wording
    "https://github.com/facebookresearch/fairseq/issues/1096",  # no world size: new
    "https://github.com/open-mmlab/mmcv/issues/636",  # library: the launcher's error only
}

# Batch 27, measured once (c3005b7, the rules of phase W): 6 of 12, and that figure
# stays. Its three user-code logs got no environment cause (one the program's error of
# its type, two no finding: messages without a traceback or a type).
BATCH27_MISSED = {
    "https://github.com/pytorch/pytorch/issues/136228",  # library: no exception line
    "https://github.com/pytorch/pytorch/issues/95892",  # library: torch's own ordinal
    "https://github.com/hzwer/ECCV2022-RIFE/issues/52",  # cut at _env_error("MASTER_ADDR")
    "https://github.com/huggingface/transformers/issues/21736",  # user: no traceback
    "https://github.com/zai-org/VisualGLM-6B/issues/54",  # bash: deepspeed not found
    "https://github.com/modelscope/ms-swift/issues/1538",  # user: a message without type
}

# Batch 28, measured once (d589441, the rules of phase X): 2 of 11, and that figure
# stays. Its three user-code logs got no environment cause (one the program's error of
# its type, two no finding: messages without a traceback or a type).
BATCH28_MISSED = {
    "https://github.com/lm-sys/FastChat/issues/1235",  # user: one line, type Exception
    "https://github.com/huggingface/trl/issues/722",  # user: a message without type
    "https://github.com/kohya-ss/sd-scripts/issues/317",  # Windows: c10d's warnings only
    "https://github.com/ultralytics/ultralytics/issues/918",  # torchrun's SIGHUP: new
    "https://github.com/ymcui/Chinese-LLaMA-Alpaca-3/issues/47",  # torchrun's SIGHUP: new
    "https://github.com/Lightning-AI/pytorch-lightning/issues/17436",  # library: no frame
    "https://github.com/Lightning-AI/pytorch-lightning/issues/2683",  # library: a timeout
    "https://github.com/pytorch/pytorch/pull/137745",  # library: c10d's retried connects
    "https://github.com/pytorch/pytorch/issues/125990",  # library: a segfault under gdb
}

# Batch 30, measured once (429a2f7, the rules after the H100 run): 5 of 6, and that
# figure stays. Its one miss was a cause no signature named then (OpenMMLab's results
# collected through a directory the nodes do not share).
BATCH30_MISSED = {
    "https://github.com/open-mmlab/mmsegmentation/issues/1713",  # new: part_2.pkl unseen
}

# Batch 31, measured once (22df5c5, the rules of phase Z): 5 of 5, and that figure stays
# (4 of 5 with its collector's own family for fluxgym#504, set before the run by the
# families' definitions: the batch's header in explain_unseen.toml).
BATCH31_MISSED = set()

# Batch 32, measured once (a14e830, the rules of phase Z): 1 of 9, and that figure stays.
# Megatron-style stacks and PyTorch on AMD GPUs: the families' words there (ROCm's 'No HIP
# GPUs', slurmstepd's execve, a removed torch module in a Megatron checkout) and three
# causes no signature named then.
BATCH32_MISSED = {
    "https://github.com/alibaba/Pai-Megatron-Patch/issues/183",  # library: type glued
    "https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/650",  # new: CUDA Multicast
    "https://github.com/deepspeedai/Megatron-DeepSpeed/issues/117",  # torch._six removed
    "https://github.com/NVIDIA/TransformerEngine/issues/1365",  # pybind11's refusal alone
    "https://github.com/NVIDIA-NeMo/Speech/issues/14829",  # new: srun's launch, pmix
    "https://github.com/Parsl/parsl/issues/3858",  # ROCm's 'No HIP GPUs are available'
    "https://github.com/ROCm/pytorch/issues/453",  # new: MPI without CUDA-aware support
    "https://github.com/CSCfi/pytorch-ddp-examples/issues/1",  # slurmstepd's execve
}

# Batch 33, measured once (8f11122, phase AA's rules): 0 of 4, and that
# figure stays: TransformerEngine's multicast refusal in other words than phase AA read,
# a library's refusal of several GPUs, and two libraries' bugs (one only as vLLM's NCCL
# error, one in VS Code's exception format).
BATCH33_MISSED = {
    "https://github.com/unslothai/unsloth/issues/724",  # new: Unsloth refuses >1 GPU
    "https://github.com/NVIDIA/TransformerEngine/issues/991",  # 'operation not supported'
    "https://github.com/NVIDIA-NeMo/RL/issues/564",  # library: NCCL's system error only
    "https://github.com/NVIDIA/NeMo-Aligner/issues/153",  # library: VS Code's format
}

# Batch 34, measured once (44f3342, phase AB's rules): 1 of 8, and that figure stays.
# NeMo RL and TransformerEngine/Megatron-LM: short quotes (a vLLM worker's pidfd_getfd,
# vLLM's CuMem OOM without its line number), libraries' bugs seen only as NCCL's or
# Userbuffers' words, and a cross-rack NCCL hang seen only as Ray's dead worker.
BATCH34_MISSED = {
    "https://github.com/NVIDIA-NeMo/RL/issues/595",  # library: NCCL's system error only
    "https://github.com/NVIDIA-NeMo/RL/issues/522",  # pidfd_getfd in a vLLM worker's words
    "https://github.com/NVIDIA-NeMo/RL/issues/2937",  # new: Ray's dead worker only
    "https://github.com/NVIDIA-NeMo/RL/pull/3280",  # CuMem's OOM, no line number
    "https://github.com/NVIDIA/TransformerEngine/issues/994",  # library: UB's NCCL error
    "https://github.com/NVIDIA/Megatron-LM/issues/7",  # torch._C's removed name, 2019
    "https://github.com/NVIDIA/TransformerEngine/issues/1473",  # a cut frame, 'no arguments'
}

BATCH40_MISSED = {
    "https://github.com/Lightning-AI/pytorch-lightning/issues/4171",  # library: one CUDA line
    "https://github.com/dmlc/dgl/issues/2745",  # new: DGL's socket RPC, a message too large
}

BATCH39_MISSED = {
    "https://github.com/huggingface/accelerate/issues/190",  # RNG state: the program's
    "https://github.com/deepspeedai/DeepSpeedExamples/issues/845",  # NCCL's remote error
}

BATCH38_MISSED = {
    "https://github.com/Lightning-AI/pytorch-lightning/issues/7491",  # library: a checkout
    "https://github.com/Lightning-AI/pytorch-lightning/issues/8634",  # NCCL's invalid usage
    "https://github.com/Lightning-AI/pytorch-lightning/issues/6893",  # pickling, no type
    "https://github.com/pytorch/pytorch/pull/121240",  # NCCL's dtype refused, no rule
    "https://github.com/pytorch/pytorch/issues/14187",  # user: an error quoted in prose
    "https://github.com/pytorch/pytorch/issues/92573",  # library: torch's own assertion
}

BATCH37_MISSED = {
    "https://github.com/facebookresearch/dinov2/issues/134",  # new: FSDP unsharded
    "https://github.com/hiyouga/LlamaFactory/issues/6898",  # new: ZeRO-3 and an FP8 model
    "https://github.com/tatsu-lab/stanford_alpaca/pull/131",  # a frame cut at its start
    "https://github.com/meta-pytorch/torchtune/issues/1165",  # library: timeouts only
    "https://github.com/axolotl-ai-cloud/axolotl/pull/1559",  # library: FSDP's dtype line
    "https://github.com/zjysteven/lmms-finetune/issues/79",  # driver: a timeout only
    "https://github.com/haotian-liu/LLaVA/issues/447",  # user: timeouts out of step
}

BATCH36_MISSED = {
    "https://github.com/ecmwf/anemoi-core/issues/383",  # library: its ValueError alone
    "https://github.com/ACEsuit/mace/issues/1215",  # library: cut inside torch's frame
}

BATCH35_MISSED = {
    "https://github.com/ultralytics/ultralytics/issues/9103",  # new: ranks can't import it
    "https://github.com/huggingface/lerobot/pull/2270",  # library: accelerate's device_map
    "https://github.com/unslothai/unsloth/issues/362",  # cut before its error line
    "https://github.com/unslothai/unsloth/issues/1933",  # library: Unsloth's own guard
    "https://github.com/determined-ai/determined/issues/8915",  # P2P: a watchdog timeout
}

# A log its collector labelled the job's own code that got an environment cause, as
# measured: gpt-neox's launch on one node with its Slurm/MPI launcher (DeepSpeed's runner
# then starts plain python, and every rank starts the store's server), whose log holds
# torch's 'RuntimeError: Address already in use' alone, read as the port taken by another
# job. Batch 37's LLaVA#447: one rank's CUDA assertion (its sequences too long, the
# user's data) seen only as the other ranks' watchdog timeouts at two collectives, read
# as ranks out of step (a cause in the program's code, not the environment's, but a
# signature's, not the program's error). The list is exact: a new one fails the batch's
# test.
USER_GOT_ENVIRONMENT = {"https://github.com/EleutherAI/gpt-neox/issues/849":
                        "rendezvous.port_in_use",
                        "https://github.com/haotian-liu/LLaVA/issues/447":
                        "torch.collective_mismatch"}

# The batches rules were written from after their measurement, and their misses.
WRITTEN_FROM = {4: BATCH4_MISSED, 5: BATCH5_MISSED, 6: BATCH6_MISSED, 7: BATCH7_MISSED,
                8: BATCH8_MISSED, 9: BATCH9_MISSED, 10: BATCH10_MISSED, 11: BATCH11_MISSED,
                12: BATCH12_MISSED, 14: BATCH14_MISSED, 15: BATCH15_MISSED,
                16: BATCH16_MISSED, 17: BATCH17_MISSED, 18: BATCH18_MISSED,
                19: BATCH19_MISSED, 20: BATCH20_MISSED, 21: BATCH21_MISSED,
                22: BATCH22_MISSED, 23: BATCH23_MISSED, 24: BATCH24_MISSED,
                25: BATCH25_MISSED, 26: BATCH26_MISSED, 27: BATCH27_MISSED,
                28: BATCH28_MISSED, 30: BATCH30_MISSED, 32: BATCH32_MISSED,
                33: BATCH33_MISSED, 34: BATCH34_MISSED, 35: BATCH35_MISSED,
                36: BATCH36_MISSED, 37: BATCH37_MISSED}

# Batches 8-39 as measured (no batch 29 was collected): logs, user-code logs among them,
# right at the first run, the misses, and those of the misses whose cause no signature
# named then (`new.*`, kept as family_when_measured once a rule was written from it). A
# miss written from since is a training log (split "train") and must get its cause now;
# one not yet written from is still held out and may stay a miss.
MEASURED_BATCHES = {
    8: (12, 6, 10, BATCH8_MISSED, {"https://github.com/pytorch/pytorch/issues/37004"}),
    9: (15, 4, 6, BATCH9_MISSED, {
        "https://github.com/pytorch/pytorch/pull/177472",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/19062",
        "https://github.com/huggingface/accelerate/issues/2240",
        "https://github.com/modelscope/ms-swift/issues/3171"}),
    10: (27, 6, 24, BATCH10_MISSED, {"https://github.com/pytorch/torchtitan/issues/441"}),
    11: (23, 8, 19, BATCH11_MISSED, {
        "https://github.com/Alpha-VLLM/LLaMA2-Accessory/issues/76",
        "https://github.com/huggingface/pytorch-image-models/issues/1742"}),
    12: (16, 7, 12, BATCH12_MISSED, {
        "https://github.com/huggingface/transformers/issues/20988",
        "https://github.com/haotian-liu/LLaVA/issues/52",
        "https://github.com/BAAI-DCAI/Bunny/issues/46"}),
    13: (4, 3, 4, BATCH13_MISSED, set()),
    14: (32, 10, 19, BATCH14_MISSED, {
        "https://github.com/huggingface/transformers/issues/10666",
        "https://github.com/verl-project/verl/pull/4799",
        "https://github.com/deepspeedai/DeepSpeed/pull/7585",
        "https://github.com/pytorch/torchtitan/pull/1465",
        "https://github.com/deepspeedai/DeepSpeed/pull/7869",
        "https://github.com/deepspeedai/DeepSpeed/pull/4985",
        "https://github.com/Lightning-AI/pytorch-lightning/pull/6002",
        "https://github.com/zcablii/LSKNet/issues/112"}),
    15: (22, 7, 12, BATCH15_MISSED, {
        "https://github.com/OpenRLHF/OpenRLHF/pull/536",
        "https://github.com/NovaSky-AI/SkyRL/pull/357",
        "https://github.com/NovaSky-AI/SkyRL/pull/612",
        "https://github.com/verl-project/verl/pull/5548",
        "https://github.com/deepspeedai/DeepSpeed/issues/5818",
        "https://github.com/DLLXW/baby-llama2-chinese/pull/56"}),
    16: (25, 7, 12, BATCH16_MISSED, {
        "https://github.com/NVIDIA-NeMo/Speech/issues/13996",
        "https://github.com/mila-iqia/milabench/issues/183",
        "https://github.com/instructlab/training/issues/678",
        "https://github.com/NVIDIA/TransformerEngine/pull/1031",
        "https://github.com/deepspeedai/DeepSpeed/pull/4962",
        "https://github.com/OpenRLHF/OpenRLHF/pull/524"}),
    17: (25, 9, 12, BATCH17_MISSED, BATCH17_MISSED - {"https://github.com/NVIDIA/apex/issues/515"}),
    18: (25, 8, 10, BATCH18_MISSED, BATCH18_MISSED - {
        "https://github.com/kemaloksuz/aLRPLoss/issues/6",
        "https://github.com/pytorch/elastic/issues/134",
        "https://github.com/mlfoundations/open_lm/pull/234"}),
    19: (21, 2, 10, BATCH19_MISSED, set()),
    20: (14, 2, 5, BATCH20_MISSED, {
        "https://github.com/vllm-project/vllm/issues/19613",
        "https://github.com/Haochen-Wang409/ross/issues/13",
        "https://github.com/hiyouga/LlamaFactory/issues/5497",
        "https://github.com/bytedance/HLLM/issues/30"}),
    21: (10, 0, 3, BATCH21_MISSED, set()),
    22: (15, 1, 8, BATCH22_MISSED, {"https://github.com/karpathy/nanoGPT/pull/55"}),
    23: (23, 3, 10, BATCH23_MISSED, {"https://github.com/henrywoo/pyllama/issues/25",
                                     "https://github.com/meta-llama/llama/issues/415"}),
    24: (5, 1, 2, BATCH24_MISSED, set()),
    25: (12, 2, 6, BATCH25_MISSED, {"https://github.com/QwenLM/Qwen/issues/1125"}),
    26: (10, 1, 2, BATCH26_MISSED, {"https://github.com/hiyouga/LlamaFactory/issues/5629",
                                    "https://github.com/facebookresearch/fairseq/issues/1096"}),
    27: (12, 3, 6, BATCH27_MISSED, set()),
    28: (11, 3, 2, BATCH28_MISSED, {"https://github.com/ultralytics/ultralytics/issues/918",
                                    "https://github.com/ymcui/Chinese-LLaMA-Alpaca-3/issues/47"}),
    30: (6, 0, 5, BATCH30_MISSED, BATCH30_MISSED),
    31: (5, 2, 5, BATCH31_MISSED, set()),
    32: (9, 0, 1, BATCH32_MISSED, {"https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/650",
                                   "https://github.com/NVIDIA-NeMo/Speech/issues/14829",
                                   "https://github.com/ROCm/pytorch/issues/453"}),
    33: (4, 0, 0, BATCH33_MISSED, {"https://github.com/unslothai/unsloth/issues/724"}),
    34: (8, 0, 1, BATCH34_MISSED, {"https://github.com/NVIDIA-NeMo/RL/issues/2937"}),
    35: (9, 0, 4, BATCH35_MISSED, {"https://github.com/ultralytics/ultralytics/issues/9103"}),
    36: (8, 0, 6, BATCH36_MISSED, set()),
    37: (14, 2, 7, BATCH37_MISSED, {"https://github.com/facebookresearch/dinov2/issues/134",
                                    "https://github.com/hiyouga/LlamaFactory/issues/6898"}),
    38: (14, 2, 8, BATCH38_MISSED, set()),
    39: (4, 0, 2, BATCH39_MISSED, set()),
    40: (3, 0, 1, BATCH40_MISSED, {"https://github.com/dmlc/dgl/issues/2745"}),
}


@pytest.mark.parametrize("batch", sorted(MEASURED_BATCHES), ids="batch{}".format)
def test_a_batch_keeps_its_measured_causes(batch, tmp_path, matrix):
    """A batch committed with its causes before explain first ran on it: every log it got
    right at that first run stays right, every user-code log gets the program's error
    (never an environment cause), the figure is the one measured; the misses, written
    from since, get their cause now, or, where the log does not show the thread's cause,
    the best its text allows (NOT_IN_THE_TEXT): training results, not a held-out figure."""
    logs, _, measured_right, missed, new = MEASURED_BATCHES[batch]
    entries = [e for e in ENTRIES if e.get("batch") == batch]
    right, wrong = _scored(entries, tmp_path, matrix)
    assert len(entries) == logs
    assert all(e["split"] == "heldout" or e.get("heldout_when_measured") for e in entries)
    assert {e["source"] for e in entries
            if e.get("family_when_measured", e["family"]).startswith("new.")} == new
    written = {e["source"] for e in entries if e["split"] == "train"}
    # a user-code log: the program's error of its type, or (a miss not yet written from)
    # no finding or the program's error of another type; never an environment cause
    users = {e["source"] for e in entries if e["family"] == "user"}
    assert users - (missed - written) - set(NOT_IN_THE_TEXT) <= right, wrong
    assert all(w[2] in (None, "program.exception") or USER_GOT_ENVIRONMENT.get(w[0]) == w[2]
               for w in wrong if w[0] in users), wrong
    # improvements are welcome (then say so in docs/explain.md: the figure stays the measured one)
    assert right >= {e["source"] for e in entries} - missed, wrong
    assert len(right) >= measured_right
    assert right >= (missed & written) - set(NOT_IN_THE_TEXT), wrong
    assert {w[0] for w in wrong} <= set(NOT_IN_THE_TEXT) | (missed - written), wrong


@pytest.mark.parametrize("batch", sorted(MEASURED_BATCHES), ids="batch{}".format)
def test_a_batch_cites_no_thread_of_the_corpus_or_earlier_batches(batch):
    logs, users, _, missed, _ = MEASURED_BATCHES[batch]
    entries = [e for e in ENTRIES if e.get("batch") == batch]
    # user-code logs as measured (a `new.*` miss read since as the program's error keeps
    # its measured family: phase N's CPU tensor on an NCCL-only group)
    assert len(entries) == logs and sum(
        e.get("family_when_measured", e["family"]) == "user" for e in entries) == users
    assert all(e["split"] == "heldout" or e["source"] in missed for e in entries)
    _cites_nothing_earlier(batch)


"""The built-in suite: every built-in probe, declared, in the order the ranks run them.

One list, read by both drivers (``envcheck run`` and launcher mode), ``envcheck probes``,
the matrix's check ids and the ranks: a check a probe reports that is not declared here
is an error, reported as such. Adding a probe is adding its module and one entry here;
tests/test_probe_suite.py checks each entry against its module (the function exists, the
checks it opens are the ones declared, no probe left out).

stdlib only: the supervisor imports this without torch.
"""

from typing import Tuple

from .spec import FollowUp, Probe

# Imported ahead of the probe (worker/runtime): DistributedDataParallel's first
# construction imports torch._dynamo (seconds).
_DDP = ("torch._dynamo",)

SUITE: Tuple[Probe, ...] = (
    Probe(
        builtin=True, name="launch", module="envcheck.probes.launch", function="probe_launch",
        summary="RANK/LOCAL_RANK/WORLD_SIZE consistent, one device per rank, "
                "CUDA_VISIBLE_DEVICES and SLURM agree",
        checks=("env", "rank_mapping", "device", "unique_device", "cuda_visible_devices",
                "slurm")),
    Probe(
        builtin=True, name="hosts", module="envcheck.probes.hosts", function="probe_hosts",
        summary="versions, libraries, NCCL_*/GLOO_*/TORCH_* variables and clocks the "
                "same on every host; /dev/shm, memlock and open-files limits",
        checks=("skew", "clock", "shm", "memlock", "nofile")),
    Probe(
        builtin=True, name="collectives", module="envcheck.probes.collectives",
        function="probe_collectives",
        summary="init time and backend; all_reduce, broadcast, all_gather, "
                "all_gather_object, barrier give correct values",
        checks=("init", "all_reduce", "broadcast", "all_gather", "all_gather_object",
                "barrier")),
    Probe(
        builtin=True, name="nccl", module="envcheck.probes.nccl", function="probe_nccl",
        summary="NCCL version, NCCL_* env, init on every local GPU, collectives, "
                "all_reduce bus bandwidth (gloo on CPU)",
        checks=("version", "env", "p2p", "init", "collectives", "bandwidth")),
    Probe(
        builtin=True, name="bandwidth", module="envcheck.probes.bandwidth",
        function="probe_bandwidth",
        summary="Send/recv bus bandwidth per host, judged against its peers' median and "
                "--min-busbw",
        checks=("per_host",)),
    Probe(
        builtin=True, name="serialization", module="envcheck.probes.serialization",
        function="probe_serialization",
        summary="pickle/deepcopy of process groups, modules holding one and DDP; "
                "fresh+load_state_dict fix; torch.save",
        checks=("pickle_default_group", "pickle_subgroup", "deepcopy_module_with_group",
                "model", "ddp_wrap", "deepcopy_ddp", "deepcopy_ddp_module",
                "fresh_load_state_dict", "pickle_ddp", "save_module_with_group"),
        preload=_DDP),
    Probe(
        builtin=True, name="checkpoint", module="envcheck.probes.checkpoint",
        function="probe_checkpoint",
        summary="torch.save/load incl. the weights_only default; DCP across ranks, "
                "replica dedup, other world size, async_save; no process group saved",
        checks=("model", "save_load", "weights_only", "default_load", "dcp_save_load",
                "dcp_dedup", "reshard_load", "async_save", "async_snapshot",
                "no_process_group"),
        preload=_DDP + ("torch.distributed.checkpoint",)),
    Probe(
        builtin=True, name="ddp-sync", module="envcheck.probes.ddp_sync", function="probe_ddp_sync",
        summary="DDP on mismatched models fails fast; a rank out of step ends in an error "
                "with timeout=; all ranks reach a barrier after setup",
        checks=("mismatched_shapes", "extra_parameter", "out_of_step",
                "barrier_after_setup"),
        preload=_DDP),
    Probe(
        builtin=True, name="frameworks", module="envcheck.probes.frameworks",
        function="probe_frameworks",
        summary="Lightning Fabric (setup, deepcopy, save/load; its own launcher with "
                "--framework lightning) and Accelerate (prepare, deepcopy, save/load) on "
                "the model; DeepSpeed's engine",
        checks=("lightning_setup", "lightning_deepcopy", "lightning_save_load",
                "lightning_own_launcher", "accelerate_prepare", "accelerate_deepcopy",
                "accelerate_save_load", "deepspeed_initialize"),
        preload=_DDP,
        # A second or more each on a loaded machine, imported in the background while the
        # earlier probes run, in the rank itself (Lightning reads RANK as it imports).
        # Where one is not installed, its import fails at once and the check skips.
        preload_in_rank=("lightning.fabric", "accelerate")),
    Probe(
        builtin=True, name="fsdp", module="envcheck.probes.fsdp", function="probe_fsdp",
        summary="FSDP2 fully_shard step vs unsharded, get/set_state_dict + DCP round "
                "trip, subgroup save, HSDP, CPU offload; reshard to other world sizes",
        checks=("model", "train_step", "deepcopy", "ema_copy", "gradient_divide",
                "save_load", "subgroup", "hsdp", "cpu_offload", "reshard_grow",
                "reshard_shrink", "train_state_grow", "train_state_shrink"),
        # The main run's checkpoint loaded at other world sizes: "N" is the main run's.
        follow_ups=(
            FollowUp("resume_elsewhere", "N+1", "reshard_grow", also=("train_state_grow",)),
            FollowUp("resume_elsewhere", "1", "reshard_shrink",
                     also=("train_state_shrink",)),
        ),
        # It starts ranks twice more, at other world sizes: more than the whole default
        # suite's budget (docs/fsdp.md has the figures).
        opt_in=True),
    Probe(
        builtin=True, name="mesh", module="envcheck.probes.mesh", function="probe_mesh",
        summary="the job's device mesh (--mesh, --mesh-config): init_device_mesh as the "
                "job builds it; each dimension's collectives per group with right values; "
                "groups' hosts and speed",
        checks=("layout", "pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "placement",
                "speed"),
        # Runs when --mesh or --mesh-config gives the layout (docs/mesh.md).
        opt_in=True),
    Probe(
        builtin=True, name="repeat", module="envcheck.probes.repeat", function="probe_repeat",
        summary="Collectives, bandwidth and round trips in rounds: per host "
                "best/median/worst, failures",
        checks=("collectives", "bandwidth", "latency"),
        # Rounds of whole probes: run when --repeat or --for asks (docs/intermittent.md).
        opt_in=True),
)

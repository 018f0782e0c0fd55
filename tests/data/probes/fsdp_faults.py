"""Test probes for tests/test_fsdp.py, loaded with --probe-path: the fsdp probe's own
checks (``envcheck.probes.fsdp.run_checks``), with a fault injected into what DCP saved,
where a faulty filesystem or a stray writer would put it. The product carries no test
hook: the fault lives here, in a DCP adapter the probe is handed.

- ``fsdp-altered``: rank ``ALTERED_RANK`` adds 1 to the first model tensor stored in its
  own file of the round trip's checkpoint, in place on disk, after the save.
- ``fsdp-lost``: rank 0 deletes the subgroup checkpoint's .metadata between the group's
  save and its load, so that the load fails on the group's ranks only (as torch 2.4.1's
  does).

Both have fsdp's follow-up phases, which load the round trip's checkpoint at other world
sizes.
"""

import io
import os

from envcheck.probes import fsdp
from envcheck.probes.shared.dcp import Dcp

ALTERED_RANK = 1

# fsdp's own follow-up phases (probes/suite.py), for each test probe.
FOLLOW_UPS = (
    {"function": "resume_elsewhere", "world_size": "N+1", "check": "reshard_grow",
     "also": ("train_state_grow",)},
    {"function": "resume_elsewhere", "world_size": "1", "check": "reshard_shrink",
     "also": ("train_state_shrink",)},
)


def _rank():
    import torch.distributed as dist

    return dist.get_rank()


class AlteringDcp(Dcp):
    def save(self, state, path, group=None):
        out = super().save(state, path, group)
        if group is None and os.path.basename(path) in ("ckpt", "fsdp"):
            _alter(path, _rank())
        return out


class LosingDcp(Dcp):
    def save(self, state, path, group=None):
        out = super().save(state, path, group)
        if os.path.basename(path) == "subgroup" and _rank() == 0:
            os.remove(os.path.join(path, ".metadata"))
        return out


def _alter(path, rank):
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint import FileSystemReader

    dist.barrier()  # every rank's files are written
    if rank == ALTERED_RANK:
        mine = "__%d_0.distcp" % rank
        storage = FileSystemReader(path).read_metadata().storage_data
        for index, info in sorted(storage.items(), key=lambda kv: kv[0].fqn):
            if info.relative_path != mine or not index.fqn.startswith("model."):
                continue
            with open(os.path.join(path, mine), "r+b") as f:
                f.seek(info.offset)
                tensor = torch.load(io.BytesIO(f.read(info.length)), weights_only=True)
                out = io.BytesIO()
                torch.save(tensor + 1, out)
                if len(out.getvalue()) == info.length:
                    f.seek(info.offset)
                    f.write(out.getvalue())
                    break
    dist.barrier()


def probe_fsdp_altered(ctx):
    """fsdp's checks, with one rank's shard altered on disk after the round trip's save"""
    fsdp.run_checks(ctx, dcp_class=AlteringDcp)


def probe_fsdp_lost(ctx):
    """fsdp's checks, with the subgroup checkpoint's .metadata lost before its load"""
    fsdp.run_checks(ctx, dcp_class=LosingDcp)


def resume_elsewhere(ctx):
    fsdp.resume_elsewhere(ctx)

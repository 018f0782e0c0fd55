"""launch: are ranks, local ranks and devices mapped the way a launcher promises?

Real failure: training code that used RANK where it needed LOCAL_RANK put two ranks on
one GPU on every node but the first (Open-Sora-Plan). These checks compare what each
rank was told (env) with what the process group says and with what every other rank was
told, so a wrong mapping shows up before training does.
"""

import os


def _env_int(name):
    value = os.environ.get(name)
    if value is None:
        raise ValueError("%s is not set" % name)
    try:
        return int(value)
    except ValueError:
        raise ValueError("%s=%r is not an integer" % (name, value)) from None


def probe_launch(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    # The checks share nothing but the context: one function each.
    for name, body in (("env", _env), ("rank_mapping", _rank_mapping), ("device", _device),
                       ("unique_device", _unique_device),
                       ("cuda_visible_devices", _cuda_visible_devices), ("slurm", _slurm)):
        with ctx.check(name) as c:
            body(ctx, c)


def _env(ctx, c):
    import torch.distributed as dist

    c.advice = ("launch with torchrun (or set RANK, LOCAL_RANK, WORLD_SIZE and "
                "LOCAL_WORLD_SIZE for every process); use LOCAL_RANK, not RANK, "
                "to pick a device")
    rank, local_rank = _env_int("RANK"), _env_int("LOCAL_RANK")
    world, local_world = _env_int("WORLD_SIZE"), _env_int("LOCAL_WORLD_SIZE")
    problems = []
    if world != dist.get_world_size():
        problems.append("WORLD_SIZE=%d but the process group has %d ranks"
                        % (world, dist.get_world_size()))
    if rank != dist.get_rank():
        problems.append("RANK=%d but the process group says rank %d"
                        % (rank, dist.get_rank()))
    if not 0 <= local_rank < local_world:
        problems.append("LOCAL_RANK=%d is outside 0..LOCAL_WORLD_SIZE-1 (%d)"
                        % (local_rank, local_world - 1))
    if local_world > world:
        problems.append("LOCAL_WORLD_SIZE=%d > WORLD_SIZE=%d" % (local_world, world))
    if problems:
        c.fail("; ".join(problems))
    c.detail = "rank %d/%d, local rank %d/%d" % (rank, world, local_rank, local_world)


MAPPING_ADVICE = ("every host must run LOCAL_WORLD_SIZE ranks with local ranks "
                  "0..LOCAL_WORLD_SIZE-1; check the launcher's --nproc-per-node and --nnodes")
# Open-Sora-Plan's fix for the seed: the device index comes from LOCAL_RANK.
LOCAL_FROM_GLOBAL_ADVICE = (
    "take the local rank from the launcher, never from the global rank: local_rank = "
    "int(os.environ['LOCAL_RANK']) (srun: SLURM_LOCALID), then "
    "torch.cuda.set_device(local_rank) and device = f'cuda:{local_rank}'; RANK equals "
    "LOCAL_RANK only on the first node")


def _group_rank():
    value = os.environ.get("GROUP_RANK")
    return int(value) if value not in (None, "") and value.strip().isdigit() else -1


def _rank_mapping(ctx, c):
    from ..worker.gather import all_gather_ints, all_gather_strings

    c.advice = MAPPING_ADVICE
    hosts = all_gather_strings(ctx, ctx.host)
    ids = all_gather_ints(ctx, [ctx.rank, ctx.local_rank, ctx.local_world_size,
                                _group_rank()])
    problems = []
    if sorted(i[0] for i in ids) != list(range(ctx.world_size)):
        problems.append("ranks are %s, expected 0..%d"
                        % (sorted(i[0] for i in ids), ctx.world_size - 1))
    names = list(dict.fromkeys(hosts))
    groups = {}
    for host in names:
        on_host = [ids[i] for i, h in enumerate(hosts) if h == host]
        local = sorted(i[1] for i in on_host)
        sizes = sorted(set(i[2] for i in on_host))
        if local != list(range(len(on_host))):
            if host != names[0] and local == sorted(i[0] for i in on_host):
                # LOCAL_RANK == RANK on a later host: the seed's mistake, at launch
                problems.append("host %s has LOCAL_RANK = RANK (%s): its local ranks "
                                "come from the global rank" % (host, local))
                c.advice = LOCAL_FROM_GLOBAL_ADVICE
            else:
                problems.append("host %s has local ranks %s for %d ranks"
                                % (host, local, len(on_host)))
        if sizes != [len(on_host)]:
            problems.append("host %s runs %d ranks but they were told "
                            "LOCAL_WORLD_SIZE=%s" % (host, len(on_host), sizes))
        groups[host] = sorted(set(i[3] for i in on_host))
    problems += _group_problems(groups, names, hosts, ids)
    # Every rank's host, by rank: after a bad end, rank 0 names the host of a rank that
    # sent nothing of its own (worker/launched.py).
    c.data = {"hosts": hosts}
    if problems:
        c.fail("; ".join(problems))
    c.detail = "%d ranks on %d host(s)" % (ctx.world_size, len(names))


def _group_problems(groups, names, hosts, ids):
    """GROUP_RANK (torchrun's node rank; srun's SLURM_NODEID): one per host, a different
    one on each, and under torchrun RANK = GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK, as
    it assigns ranks (srun may deal them out cyclically). Not checked where no launcher
    set it."""
    if any(g == [-1] for g in groups.values()):
        return []
    problems = ["host %s was told GROUP_RANK=%s" % (h, g) for h, g in groups.items()
                if len(g) > 1]
    seen = [g[0] for g in groups.values() if len(g) == 1]
    if len(set(seen)) != len(seen):
        problems.append("hosts share a GROUP_RANK: %s" % ", ".join(
            "%s=%d" % (h, g[0]) for h, g in groups.items()))
    sizes = set(i[2] for i in ids)
    if not problems and len(sizes) == 1 and os.environ.get("ENVCHECK_LAUNCHER") == "torchrun":
        size = sizes.pop()
        off = ["rank %d on %s" % (r, hosts[n]) for n, (r, lr, _, g) in enumerate(ids)
               if r != g * size + lr]
        if off:
            problems.append("%s: RANK != GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK"
                            % ", ".join(off[:4]))
    return problems


def _device(ctx, c):
    import torch

    if ctx.device.type != "cuda":
        c.skip("ranks run on CPU (backend %s): no device to map" % ctx.backend)
    current = torch.cuda.current_device()
    problem = device_problem(ctx.rank, ctx.local_rank, ctx.local_world_size,
                             ctx.device.index, current)
    if problem:
        c.fail(*problem)
    c.detail = "rank %d on cuda:%d" % (ctx.rank, current)


def device_problem(rank, local_rank, local_world_size, index, current):
    """(message, advice) when a rank is not on cuda:LOCAL_RANK, else None. A device that
    is the global rank on a later host is the seed's mistake (Open-Sora-Plan): the device
    index was taken from RANK."""
    if index == local_rank and current == local_rank:
        return None
    message = "rank %d (local rank %d) uses cuda:%d, expected cuda:%d" % (
        rank, local_rank, current, local_rank)
    if current == rank and rank >= local_world_size:
        return (message + ": its device index is the global rank",
                LOCAL_FROM_GLOBAL_ADVICE)
    return message, "call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) in every rank"


def _unique_device(ctx, c):
    import torch

    from ..worker.gather import all_gather_strings

    if ctx.device.type != "cuda":
        c.skip("ranks run on CPU (backend %s): no device to share" % ctx.backend)
    c.advice = ("two ranks on one GPU: give each rank its own device "
                "(cuda:LOCAL_RANK) and do not narrow CUDA_VISIBLE_DEVICES per rank "
                "unless LOCAL_RANK is remapped too")
    props = torch.cuda.get_device_properties(ctx.device)
    ident = str(getattr(props, "uuid", "")) or "%s/%s" % (
        os.environ.get("CUDA_VISIBLE_DEVICES", "all"), ctx.device.index)
    keys = all_gather_strings(ctx, "%s|%s" % (ctx.host, ident))
    seen = {}
    for r, key in enumerate(keys):
        seen.setdefault(key, []).append(r)
    shared = [ranks for ranks in seen.values() if len(ranks) > 1]
    if shared:
        c.fail("ranks %s share one GPU" % " and ".join(str(s) for s in shared))
    c.detail = "%d ranks on %d distinct GPUs" % (ctx.world_size, len(seen))


def _cuda_visible_devices(ctx, c):
    import torch

    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        c.detail = "not set"
    else:
        c.advice = ("set CUDA_VISIBLE_DEVICES to distinct device ids, at least "
                    "LOCAL_WORLD_SIZE of them, or leave it unset")
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if len(set(entries)) != len(entries):
            c.fail("CUDA_VISIBLE_DEVICES=%r lists a device twice" % value)
        if ctx.device.type == "cuda" and len(entries) < ctx.local_world_size \
                and len(entries) < torch.cuda.device_count():
            c.fail("CUDA_VISIBLE_DEVICES=%r shows %d device(s) to %d local ranks"
                   % (value, len(entries), ctx.local_world_size))
        c.detail = "%r (%d device(s))" % (value, len(entries))


def _slurm(ctx, c):
    if "SLURM_PROCID" not in os.environ:
        c.skip("not running under SLURM (SLURM_PROCID is not set)")
    launcher = os.environ.get("ENVCHECK_LAUNCHER")
    if launcher == "local":
        c.skip("ranks were started by envcheck run, not by srun: SLURM task ids "
               "describe the envcheck process, not the ranks")
    if launcher in ("torchrun", "env"):
        c.skip("ranks were started by %s inside the SLURM step: SLURM task ids "
               "describe the launcher's agents, not the ranks" % launcher)
    c.advice = ("under srun, derive RANK from SLURM_PROCID, LOCAL_RANK from "
                "SLURM_LOCALID and WORLD_SIZE from SLURM_NTASKS")
    pairs = (("SLURM_PROCID", ctx.rank), ("SLURM_LOCALID", ctx.local_rank),
             ("SLURM_NTASKS", ctx.world_size))
    problems = ["%s=%s but the rank's %s is %d" % (name, os.environ[name],
                {"SLURM_PROCID": "rank", "SLURM_LOCALID": "local rank",
                 "SLURM_NTASKS": "world size"}[name], value)
                for name, value in pairs
                if name in os.environ and os.environ[name] != str(value)]
    if problems:
        c.fail("; ".join(problems))
    c.detail = "SLURM task ids agree with torch's"

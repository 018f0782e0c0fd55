"""Jobs on the test cluster: one torchrun agent per host, as a user starts them."""

import dataclasses
import itertools
import os
import subprocess
import sys

_ids = itertools.count(1)
RDZV_PORT = 29400


@dataclasses.dataclass
class AgentResult:
    host: object
    code: int
    stdout: str
    stderr: str


def launcher_env(root, **extra):
    """The machine's environment without any launcher's variables, envcheck importable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_", "ENVCHECK_", "GLOO_", "NCCL_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                         "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "PYTHONPATH")}
    env["PYTHONPATH"] = root
    env.update(extra)
    return env


def torchrun_cmd(nnodes, nproc, endpoint, run_id, args, module="envcheck.worker.launched",
                 rdzv_conf=None, program=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
           "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
           "--rdzv-endpoint", endpoint, "--rdzv-id", run_id]
    if rdzv_conf:
        cmd += ["--rdzv-conf", rdzv_conf]
    if program:  # a script of the user's in front of envcheck (torchrun --no-python)
        return cmd + ["--no-python"] + list(program) + list(args)
    return cmd + ["-m", module] + list(args)


class Torchrun:
    """torchrun on each of ``hosts`` (the first hosts the c10d rendezvous), started now."""

    def __init__(self, hosts, nproc, args, root, env=None, per_host_env=None,
                 module="envcheck.worker.launched", rdzv_conf=None, start=True,
                 program=None):
        self.hosts = list(hosts)
        self.run_id = "t%d-%d" % (os.getpid(), next(_ids))
        endpoint = "%s:%d" % (self.hosts[0].addr, RDZV_PORT)
        self.cmd = torchrun_cmd(len(self.hosts), nproc, endpoint, self.run_id, args,
                                module, rdzv_conf, program)
        self.env = launcher_env(root, **(env or {}))
        self.per_host_env = per_host_env or {}
        self.agents = {}
        if start:
            for h in self.hosts:
                self.start(h)

    def start(self, host):
        env = dict(self.env, **self.per_host_env.get(host.name, {}))
        self.agents[host.name] = host.popen(self.cmd, env=env)

    def wait(self, timeout, hosts=None):
        """Every agent's exit code and output, in host order; kills what overstays."""
        results = []
        for h in hosts or self.hosts:
            p = self.agents[h.name]
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                err += "\n[test: agent on %s killed after %s s]" % (h.name, timeout)
            results.append(AgentResult(h, p.returncode, out, err))
        return results

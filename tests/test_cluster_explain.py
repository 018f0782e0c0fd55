"""explain on the logs of a real job across hosts: torchrun on two hosts of the test
cluster, each host's console saved as a user saves it (``2>&1 | tee nodeN.log``).
Rank 2, node2's first rank, dies of a bug in its own code; the others of "Connection
closed by peer". These run in CI (root); elsewhere they skip with one line.
"""

import os
import re
import shutil
import subprocess
import sys

from cluster.jobs import RDZV_PORT, launcher_env
from conftest import ROOT

from envcheck.explain import explainer as command

SCRIPT = os.path.join(ROOT, "tests", "data", "explain", "torchrun_user_error.py")


def _two_host_logs(cluster, tmp_path, extra=()):
    """Each host's console of the 2-host job (--tee 3), as (node1.log, node2.log)."""
    shutil.copy(SCRIPT, os.path.join(cluster.shared, "torchrun_user_error.py"))
    hosts = cluster.hosts[:2]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
           "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "%s:%d" % (hosts[0].addr, RDZV_PORT), "--rdzv-id", "explain-%d" % os.getpid(),
           "--tee", "3"] + list(extra) + ["/mnt/shared/torchrun_user_error.py"]
    logs, agents = [], []
    for h in hosts:
        log = tmp_path / ("%s.log" % h.name)
        logs.append(str(log))
        agents.append(h.popen(cmd, env=launcher_env(ROOT), stdout=open(log, "w"),
                              stderr=subprocess.STDOUT))
    try:
        codes = [a.wait(120) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
        os.remove(os.path.join(cluster.shared, "torchrun_user_error.py"))
    assert codes == [1, 1], [open(p).read()[-3000:] for p in logs]
    return logs


def _answer(result):
    lead = result.findings[0]
    return {"lead": (lead.signature.id, lead.ranks, lead.line.text.split(":")[0]),
            "consequences": {f.signature.id: f.ranks for f in result.consequences},
            "first_failure": {k: result.structure_data["first_failure"][k]
                              for k in ("rank", "host", "exitcode")}}


RIGHT = {"lead": ("program.exception", {2}, "FileNotFoundError"),
         "consequences": {"torch.peer_closed": {0, 1, 3}, "launch.child_failed": set()},
         "first_failure": {"rank": 2, "host": "node2", "exitcode": 1}}


def test_two_hosts_logs_lead_with_rank_2s_own_error_in_either_order(cluster, tmp_path):
    # Each agent's summary names its own host's first failure: node1's, rank 1's closed
    # connection, at the same second as rank 2's. The job's is rank 2's, the program's.
    logs = _two_host_logs(cluster, tmp_path)
    with open(logs[1], encoding="utf-8") as f:
        assert "[default0]:[rank2]: FileNotFoundError" in f.read()  # torch 2.3 and later
    for order in (logs, logs[::-1]):
        assert _answer(command.explain(order)) == RIGHT, order


def test_two_hosts_logs_of_an_older_torch_name_the_global_ranks(cluster, tmp_path):
    # Before pytorch/pytorch#118190 (torch 2.3) nothing but --tee's [defaultN]: named a
    # rank: each host's log numbers its ranks from 0. Its agent's summary ('rank : 2
    # (local_rank: 0)') says where they start. The same real logs, without the prefix
    # that change added.
    older = []
    for path in _two_host_logs(cluster, tmp_path):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"^(\[default\d\]:)\[rank\d+\]: ", r"\1", f.read(), flags=re.M)
        assert "[rank" not in text
        older.append(path.replace(".log", "-older.log"))
        with open(older[-1], "w", encoding="utf-8") as f:
            f.write(text)
    for order in (older, older[::-1]):
        assert _answer(command.explain(order)) == RIGHT, order
    # node2's log alone says the same of its ranks
    alone = command.explain(older[1:])
    assert alone.findings[0].ranks == {2}
    assert {f.signature.id: f.ranks for f in alone.consequences}["torch.peer_closed"] == {3}

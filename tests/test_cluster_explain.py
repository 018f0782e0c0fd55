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


def _check(result):
    """Rank 2's own error first, on rank 2 of node2; every other rank's a consequence;
    the job's first failure rank 2 on node2. (A rank its agent stopped at once may have printed
    nothing: the closed connection is on some of ranks 0, 1 and 3.)"""
    lead = result.findings[0]
    assert [f.signature.id for f in result.findings] == ["program.exception"]
    assert (lead.ranks, lead.hosts, lead.exception.type) == ({2}, {"node2"},
                                                             "FileNotFoundError")
    assert all(f.signature.symptom for f in result.consequences)
    peer = {f.signature.id: f.ranks for f in result.consequences}.get("torch.peer_closed")
    assert peer and peer <= {0, 1, 3}, peer
    # each line is its host's: the log it is in says so (its agent's summary)
    hosts = {f.signature.id: f.hosts for f in result.consequences}["torch.peer_closed"]
    assert hosts == {"node1" if 0 in peer or 1 in peer else None,
                     "node2" if 3 in peer else None} - {None}, (peer, hosts)
    first = result.structure_data["first_failure"]
    assert (first["rank"], first["host"], first["exitcode"]) == (2, "node2", 1), first


def test_two_hosts_logs_lead_with_rank_2s_own_error_in_either_order(cluster, tmp_path):
    # Each agent's summary names its own host's first failure: node1's, a closed
    # connection, at the same second as rank 2's (or, its agent seeing its rank end
    # sooner, the second before). The job's is rank 2's, the program's own.
    logs = _two_host_logs(cluster, tmp_path)
    with open(logs[1], encoding="utf-8") as f:
        assert "[default0]:[rank2]: FileNotFoundError" in f.read()  # torch 2.3 and later
    for order in (logs, logs[::-1]):
        _check(command.explain(order))
    # node1's agent saw its rank end the second before node2's saw rank 2's: its
    # Root Cause is still a reaction to rank 2's exit
    with open(logs[0], encoding="utf-8") as f:
        text = f.read()
    sooner = re.sub(r"(time\s*: )\S+", r"\g<1>2000-01-01_00:00:00", text)
    assert sooner != text
    earlier = logs[0].replace(".log", "-sooner.log")
    with open(earlier, "w", encoding="utf-8") as f:
        f.write(sooner)
    for order in ([earlier, logs[1]], [logs[1], earlier]):
        _check(command.explain(order))


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
        _check(command.explain(order))
    # node2's log alone says the same of its ranks
    alone = command.explain(older[1:])
    assert (alone.findings[0].ranks, alone.findings[0].hosts) == ({2}, set())
    assert {f.signature.id: f.ranks for f in alone.consequences}.get(
        "torch.peer_closed", {3}) == {3}

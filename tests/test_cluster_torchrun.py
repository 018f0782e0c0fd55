"""envcheck across real hosts: torchrun's c10d rendezvous between network namespaces.

Each host has its own name, /tmp, /etc/hosts and address (tests/cluster); 2 ranks per
host, gloo. These run in CI (root); elsewhere they skip with one line.
"""

import json
import os

from cluster.jobs import Torchrun
from conftest import ROOT, checks_by_id, validate_report


def _report(host, path="/tmp/report.json"):
    with open(host.path(path), encoding="utf-8") as f:
        return validate_report(json.load(f))


def _run(hosts, args, timeout=240, **kw):
    job = Torchrun(hosts, 2, ["--out", "/tmp/out-%s" % id(hosts)] + list(args), ROOT, **kw)
    return job, job.wait(timeout)


def test_two_hosts_healthy_with_a_shared_checkpoint_dir(cluster):
    hosts = cluster.hosts[:2]
    job, res = _run(hosts, ["--json", "/tmp/report.json", "--checkpoint-dir", "/mnt/shared",
                            "-p", "launch", "-p", "collectives", "-p", "checkpoint"])
    assert [r.code for r in res] == [0, 0], [(r.stdout[-2000:], r.stderr[-2000:]) for r in res]
    report = _report(hosts[0])
    assert [(r["rank"], r["host"], r["local_rank"]) for r in report["ranks"]] == [
        (0, "node1", 0), (1, "node1", 1), (2, "node2", 0), (3, "node2", 1)]
    checks = checks_by_id(report)
    assert checks["launch.rank_mapping"]["detail"] == "4 ranks on 2 host(s)"
    for name in ("dcp_save_load", "dcp_dedup", "reshard_load"):
        assert checks["checkpoint." + name]["outcome"] == "passed", checks["checkpoint." + name]
    # rank 0's host printed the report; the other host says where it is
    assert "4 on node1, node2, backend gloo" in res[0].stdout
    # nothing left in the shared directory
    assert os.listdir(cluster.shared) == []

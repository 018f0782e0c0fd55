"""envcheck across real hosts: torchrun's c10d rendezvous between network namespaces.

Each host has its own name, /tmp, /etc/hosts and address (tests/cluster); 2 ranks per
host, gloo. These run in CI (root); elsewhere they skip with one line.
"""

import itertools
import json
import os

from cluster.jobs import Torchrun
from conftest import ROOT, checks_by_id, validate_report

_jobs = itertools.count(1)


def _report(host, path):
    with open(host.path(path), encoding="utf-8") as f:
        return validate_report(json.load(f))


def _run(hosts, args, timeout=240, **kw):
    """torchrun on ``hosts``, 2 ranks each; (results, report path on rank 0's host)."""
    n = next(_jobs)
    report = "/tmp/report-%d.json" % n
    job = Torchrun(hosts, 2, ["--out", "/tmp/out-%d" % n, "--json", report] + list(args),
                   ROOT, **kw)
    return job.wait(timeout), report


def _where(res):
    return [(r.host.name, r.code, r.stdout[-3000:], r.stderr[-3000:]) for r in res]


DCP = ("dcp_save_load", "dcp_dedup", "reshard_load")


def test_two_hosts_with_a_shared_checkpoint_dir_pass_dcp(cluster):
    hosts = cluster.hosts[:2]
    res, path = _run(hosts, ["--checkpoint-dir", "/mnt/shared", "-p", "launch",
                             "-p", "checkpoint"])
    assert [r.code for r in res] == [0, 0], _where(res)
    report = _report(hosts[0], path)
    assert [(r["rank"], r["host"], r["local_rank"]) for r in report["ranks"]] == [
        (0, "node1", 0), (1, "node1", 1), (2, "node2", 0), (3, "node2", 1)]
    checks = checks_by_id(report)
    assert checks["launch.rank_mapping"]["detail"] == "4 ranks on 2 host(s)"
    for name in DCP:
        assert checks["checkpoint." + name]["outcome"] == "passed", checks["checkpoint." + name]
    assert "4 on node1, node2, backend gloo" in res[0].stdout
    assert os.listdir(cluster.shared) == []  # nothing left in the shared directory


def test_a_checkpoint_dir_that_is_not_shared_fails_dcp_and_names_the_host(cluster):
    hosts = cluster.hosts[:2]
    for h in hosts:  # the same path on both hosts, each its own /tmp: not shared
        os.makedirs(h.path("/tmp/ckpt"), exist_ok=True)
    res, path = _run(hosts, ["--checkpoint-dir", "/tmp/ckpt", "-p", "checkpoint"])
    assert [r.code for r in res] == [1, 0], _where(res)
    check = checks_by_id(_report(hosts[0], path))["checkpoint.dcp_save_load"]
    assert check["outcome"] == "failed" and check["verdict"] == "unexpected"
    assert check["detail"].startswith(
        "ranks 2,3 on node2: cannot see rank 0's files in /tmp/ckpt (made on node1): the "
        "directory is not shared between node1 and node2, so "
        "torch.distributed.checkpoint.load fails here as in training (no .metadata")
    assert "--checkpoint-dir DIR" in check["advice"]


def test_three_hosts_without_a_checkpoint_dir_say_dcp_across_hosts_was_not_tested(cluster):
    res, path = _run(cluster.hosts, ["-p", "launch", "-p", "checkpoint"])
    assert [r.code for r in res] == [0, 0, 0], _where(res)
    report = _report(cluster.hosts[0], path)
    assert [(r["rank"], r["host"]) for r in report["ranks"]] == [
        (0, "node1"), (1, "node1"), (2, "node2"), (3, "node2"), (4, "node3"), (5, "node3")]
    checks = checks_by_id(report)
    assert checks["launch.rank_mapping"]["detail"] == "6 ranks on 3 host(s)"
    check = checks["checkpoint.dcp_save_load"]
    assert check["outcome"] == "skipped"
    assert check["detail"].startswith(
        "DCP across hosts not tested: the ranks are on 3 hosts (node1, node2, node3) and "
        "no directory every host mounts was given; to test it: --checkpoint-dir DIR")

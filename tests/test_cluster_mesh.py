"""The mesh probe across hosts: 2 hosts x 2 ranks under torchrun (launcher mode), gloo.

dp 2, tp 2 laid both ways: TorchTitan's order keeps each tp group inside a host (no
warning); --mesh-order tp,dp lays each across both, and placement names the order that
would not. Then node2's own link (its eth0) rate-limited with tc's token bucket: the
speed check names the slow group and node2 as the sender of the slow link.
"""

import contextlib
import itertools
import json

from cluster.jobs import Torchrun
from conftest import ROOT, checks_by_id, validate_report

_jobs = itertools.count(1)
RATE = "200mbit"  # 25 MB/s: 50-100x below the veth links here, and still seconds a run


def _run(hosts, args, timeout=240):
    n = next(_jobs)
    report = "/tmp/mesh-report-%d.json" % n
    job = Torchrun(hosts, 2, ["--out", "/tmp/mesh-out-%d" % n, "--json", report,
                              "-p", "mesh"] + list(args), ROOT)
    res = job.wait(timeout)
    with open(hosts[0].path(report), encoding="utf-8") as f:
        checks = checks_by_id(validate_report(json.load(f)))
    return res, checks


def _where(res):
    return "\n".join("%s: exit %s\n%s\n%s" % (r.host.name, r.code, r.stdout[-3000:],
                                              r.stderr[-3000:]) for r in res)


@contextlib.contextmanager
def _slow_sender(host):
    """``host``'s outbound link (its eth0) limited to RATE, undone whatever happens."""
    host.run(["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", RATE, "burst",
              "32kbit", "latency", "400ms"], check=True)
    try:
        yield
    finally:
        host.run(["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)


def test_tp_inside_each_host_passes_without_a_warning(cluster):
    res, checks = _run(cluster.hosts[:2], ["--mesh", "dp=2,tp=2"])
    assert [r.code for r in res] == [0, 0], _where(res)
    placement = checks["mesh.placement"]
    assert placement["outcome"] == "passed", placement
    assert placement["detail"] == ("dp_shard: [0,2] node1+node2, [1,3] node1+node2; "
                                   "tp: [0,1] node1, [2,3] node2")
    for dim in ("dp_shard", "tp"):
        assert checks["mesh." + dim]["outcome"] == "passed", checks["mesh." + dim]
    assert checks["mesh.tp"]["ranks"]["2"]["data"]["hosts"] == ["node2"]
    assert checks["mesh.speed"]["outcome"] == "passed", checks["mesh.speed"]


def test_tp_across_hosts_is_the_placement_warning_naming_the_better_order(cluster):
    res, checks = _run(cluster.hosts[:2], ["--mesh", "dp=2,tp=2", "--mesh-order", "tp,dp"])
    assert [r.code for r in res] == [1, 0], _where(res)
    placement = checks["mesh.placement"]
    assert placement["outcome"] == "failed", placement
    assert placement["detail"].startswith(
        "ranks 0,1 on node1; 2,3 on node2: tp groups [0,2] [1,3] span hosts "
        "(node1+node2), where the order dp_shard,tp keeps each inside one host"), placement
    assert "build the mesh in the order dp_shard,tp" in placement["advice"]
    # the groups themselves still work
    assert checks["mesh.tp"]["outcome"] == "passed"
    assert checks["mesh.tp"]["ranks"]["0"]["data"]["group"] == [0, 2]


def test_a_rate_limited_host_is_named_with_its_slow_group(cluster):
    hosts = cluster.hosts[:2]
    with _slow_sender(hosts[1]):
        res, checks = _run(hosts, ["--mesh", "dp=2,tp=2"])
    assert [r.code for r in res] == [1, 0], _where(res)
    speed = checks["mesh.speed"]
    assert speed["outcome"] == "failed", speed
    slow = speed["ranks"]["0"]["data"]["slow"]
    assert slow["dim"] == "dp_shard" and slow["ranks"] in ([0, 2], [1, 3]), slow
    assert slow["host"] == "node2", slow
    assert speed["detail"].startswith(
        "ranks 2,3 on node2: dp_shard group [%s] (node1+node2) at " % ",".join(
            map(str, slow["ranks"]))), speed
    assert [speed["ranks"][r]["outcome"] for r in "0123"] == ["passed", "passed", "failed",
                                                             "failed"]
    assert " is the slowest group over the link node2 -> node1 at " in speed["detail"]
    assert "node2 sends slowly (or node1 receives slowly" in speed["detail"]
    assert speed["advice"].startswith("node2's link is slower than the rest of the mesh's")
    # the values are still right, and the tp groups inside the hosts are not blamed
    assert checks["mesh.dp_shard"]["outcome"] == "passed"
    assert checks["mesh.placement"]["outcome"] == "passed"

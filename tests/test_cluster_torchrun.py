"""envcheck across real hosts: torchrun's c10d rendezvous between network namespaces.

Each host has its own name, /tmp, /etc/hosts and address (tests/cluster); 2 ranks per
host, gloo. These run in CI (root); elsewhere they skip with one line.
"""

import itertools
import time
import json
import os
import re
import sys

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
    # The rendezvous pre-checks (core/network): nothing to say on a healthy cluster.
    for name in ("master_addr", "master_port", "host_name", "socket_interface"):
        assert checks["setup." + name]["outcome"] == "passed", checks["setup." + name]
    host_name = checks["setup.host_name"]["ranks"]
    assert host_name["0"]["detail"] == "node1 resolves to 198.18.0.1"
    assert host_name["2"]["detail"] == "node2 resolves to 198.18.0.2"
    assert checks["setup.master_addr"]["ranks"]["3"]["detail"] == "node1 (198.18.0.1) on node2"
    assert checks["setup.socket_interface"]["ranks"]["2"]["detail"] == (
        "gloo's default (this host's name): eth0 (198.18.0.2) on node2 reaches 198.18.0.1")
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


# --- Faults between hosts: each answered within --timeout plus a few seconds, blamed on
# the right host and rank, one report from rank 0, nothing left on any host. ---

TIMEOUT = 10.0
# Every rank does collectives for a minute; rank 0 says when they are under way: after
# a second of them, so that every rank's records have reached the job's store (each rank
# sends them every 0.2 s, relay.PERIOD_S). A host that dies within 0.2 s of a phase
# change is reported at its phase before (docs/multinode.md).
LOOP = '''
def probe_loop(ctx):
    """all_reduce in a loop; rank 0 marks when they are under way"""
    import os, time
    import torch, torch.distributed as dist
    with ctx.check("all_reduce"):
        t = torch.ones(1 << 16)
        begun = time.monotonic()
        end = begun + 60
        n = 0
        while time.monotonic() < end:
            dist.all_reduce(t)
            n += 1
            if n >= 20 and time.monotonic() > begun + 1.0 and ctx.rank == 0:
                open(os.environ["LOOP_MARK"], "w").close()
                n = -10 ** 9
'''
# Rank 2 (node2) sends to every other rank in a loop, each receiving from rank 2 itself
# (not a collective's tree or ring, where a rank may be waiting on a live peer alone when
# node2 dies, and never err: a full suite's run). Once node2 is gone, rank 1 records its
# error (a connection to node2 closed or reset) and then waits for rank 0; rank 0 does
# not raise, it waits for rank 1 in turn: two live ranks waiting on each other past the
# deadline, as a rank slow to leave a failed collective leaves its peers.
WAIT_ON_A_LIVE_PEER = '''
def probe_loop(ctx):
    """rank 2 sends to every rank in a loop; when a recv fails, ranks 0 and 1 wait on
    each other"""
    import os, time
    import torch, torch.distributed as dist
    word = torch.ones(1)
    with ctx.check("recv"):
        t = torch.ones(1 << 16)
        begun, n = time.monotonic(), 0
        while True:
            try:
                if ctx.rank == 2:
                    for dst in range(dist.get_world_size()):
                        if dst != 2:
                            dist.send(t, dst)
                else:
                    dist.recv(t, src=2)
            except RuntimeError:
                if ctx.rank == 0:
                    dist.recv(word, src=1)
                raise
            n += 1
            if n >= 20 and time.monotonic() > begun + 1.0 and ctx.rank == 0:
                open(os.environ["LOOP_MARK"], "w").close()
                n = -10 ** 9
    dist.recv(word, src=0)
'''
STUCK_ON_NODE2 = '''
def probe_stuck(ctx):
    """rank 2 sleeps in its own code; the others wait for it in a barrier"""
    import time
    import torch.distributed as dist
    with ctx.check("wait"):
        if ctx.rank == 2:
            time.sleep(600)
        dist.barrier()
'''


def _probe(cluster, name, source):
    path = os.path.join(cluster.shared, name)
    with open(path, "w") as f:
        f.write(source)
    return "/mnt/shared/" + name


def _wait_for(path, seconds=120):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "never appeared: %s" % path
        time.sleep(0.1)


def _fault_job(cluster, probe, per_host_env=None, env=None, hosts=None, rdzv_conf=None):
    hosts = hosts or cluster.hosts[:2]
    n = next(_jobs)
    report = "/tmp/report-%d.json" % n
    job = Torchrun(hosts, 2, ["--out", "/tmp/out-%d" % n, "--json", report, "-p", "launch",
                              "-p", probe[0], "--probe-path", probe[1],
                              "--timeout", str(TIMEOUT)], ROOT, env=env,
                   per_host_env=per_host_env, rdzv_conf=rdzv_conf)
    return job, report


def test_a_hang_on_one_host_is_blamed_on_its_rank_by_rank_0s_report(cluster):
    job, path = _fault_job(cluster, ("stuck", _probe(cluster, "stuck.py", STUCK_ON_NODE2)))
    t0 = time.monotonic()
    res = job.wait(120)
    took = time.monotonic() - t0
    assert [r.code for r in res] == [1, 1], _where(res)  # torchrun: 1 when a rank failed
    report = _report(cluster.hosts[0], path)
    check = checks_by_id(report)["stuck.wait"]
    assert check["outcome"] == "hang" and check["root_rank"] == 2, check
    assert check["detail"].startswith("rank 2 on node2: no progress for"), check["detail"]
    # the others were waiting for it in their barrier, on both hosts, as envcheck run
    # reads them: not failed of its end, which the watcher's kill brought about
    assert {r: e["detail"].split(" (")[0] for r, e in check["ranks"].items() if r != "2"} \
        == dict.fromkeys("013", "stopped by the launcher while in wait after rank 2 hung; "
                                "it was waiting in barrier"), check["ranks"]
    assert "rank 2 on node2" in res[0].stdout
    assert took < TIMEOUT + 30, took  # the import of torch, the deadline, the report


def test_a_wrong_gloo_socket_ifname_is_named_with_its_host_and_fix_before_the_rendezvous(cluster):
    # node2 names an interface it does not have, node3 the loopback one; node1 names its
    # right one (eth0): no false alarm there. Without envcheck node1's ranks wait in
    # init_process_group for its whole timeout (docs/nodes-network.md).
    job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", LOOP)),
                           hosts=cluster.hosts,
                           per_host_env={"node1": {"GLOO_SOCKET_IFNAME": "eth0"},
                                         "node2": {"GLOO_SOCKET_IFNAME": "eth9"},
                                         "node3": {"GLOO_SOCKET_IFNAME": "lo"}},
                           env={"LOOP_MARK": "/tmp/never"})
    res = job.wait(120)
    assert [r.code for r in res] == [1, 1, 1], _where(res)
    checks = checks_by_id(_report(cluster.hosts[0], path))
    check = checks["setup.socket_interface"]
    assert check["outcome"] == "failed", check
    # torchrun ends a host's other rank as soon as one fails: that one may be torn down
    # before it recorded its checks, so each host is judged by the ranks that did
    ranks = {int(r): e for r, e in check["ranks"].items()}
    assert {0, 1} <= set(ranks) and {2, 3} & set(ranks) and {4, 5} & set(ranks), (
        ranks, _where(res))
    by_host = {"node1": (0, 1), "node2": (2, 3), "node3": (4, 5)}
    assert {h: {ranks[r]["outcome"] for r in rs if r in ranks}
            for h, rs in by_host.items()} == {"node1": {"passed"}, "node2": {"failed"},
                                              "node3": {"failed"}}
    ranks = {str(r): ranks[r] for r in ranks}
    ranks.setdefault("2", ranks.get("3"))
    ranks.setdefault("4", ranks.get("5"))
    assert ranks["0"]["detail"] == ("GLOO_SOCKET_IFNAME=eth0: eth0 (198.18.0.1) on node1 "
                                    "reaches 198.18.0.1")
    assert ranks["2"]["detail"] == ("GLOO_SOCKET_IFNAME=eth9: node2 has no interface eth9 "
                                    "with an address (interfaces here: lo, eth0)")
    assert ranks["2"]["advice"] == ("on node2, set GLOO_SOCKET_IFNAME=eth0 (eth0 reaches "
                                    "MASTER_ADDR 198.18.0.1 from 198.18.0.2)")
    assert ranks["4"]["detail"] == ("GLOO_SOCKET_IFNAME=lo: lo on node3 is a loopback "
                                    "interface (127.0.0.1, ::1): the other hosts cannot reach it")
    assert ranks["4"]["advice"] == ("on node3, set GLOO_SOCKET_IFNAME=eth0 (eth0 reaches "
                                    "MASTER_ADDR 198.18.0.1 from 198.18.0.3)")
    assert re.match(r"ranks [23,]+ on node2; [45,]+ on node3: ", check["detail"]), check
    # init_process_group was not attempted anywhere: node1's ranks heard of the failure
    # through the store and ended at once, instead of waiting for the timeout
    init = checks["setup.init_process_group"]
    assert init["outcome"] == "skipped", init
    assert re.fullmatch(r"not attempted: rank [2-5] on node[23] failed setup.socket_interface",
                        init["ranks"]["0"]["detail"]), init["ranks"]["0"]
    assert not any(c["outcome"] == "hang" for c in checks.values())
    assert "setup.socket_interface" in res[0].stdout and "on node2" in res[0].stdout
    # each bad host says it in its own log, with the fix, whatever becomes of the report
    assert "envcheck: node2: setup.socket_interface failed: GLOO_SOCKET_IFNAME=eth9" \
        in res[1].stderr
    assert "fix: on node3, set GLOO_SOCKET_IFNAME=eth0" in res[2].stderr


def _debian_hosts(host):
    """Debian's default /etc/hosts on ``host``: its own name on 127.0.1.1."""
    host.write_hosts()
    with open(host.hosts_file) as f:
        lines = [line for line in f.read().splitlines()
                 if line != "%s %s" % (host.addr, host.name)]
    with open(host.hosts_file, "w") as f:
        f.write("127.0.1.1 %s\n" % host.name + "\n".join(lines) + "\n")


def test_a_host_whose_name_resolves_to_127_0_1_1_is_named_with_the_hosts_line_to_write(cluster):
    # gloo on node2 would advertise 127.0.1.1, and node1's ranks would fail connecting
    # to it (remote=[127.0.1.1], blaming node1's ranks): envcheck names node2 before.
    node2 = cluster.hosts[1]
    _debian_hosts(node2)
    job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", LOOP)),
                           env={"LOOP_MARK": "/tmp/never"})
    res = job.wait(120)
    assert [r.code for r in res] == [1, 1], _where(res)
    assert res[0].stdout.startswith("✗ Not ready for distributed training: 1 UNEXPECTED")
    check = checks_by_id(_report(cluster.hosts[0], path))["setup.host_name"]
    assert check["outcome"] == "failed" and check["verdict"] == "unexpected", check
    assert check["detail"] == (
        "ranks 2,3 on node2: node2's own name resolves to 127.0.1.1 (/etc/hosts: "
        "'127.0.1.1 node2'): gloo on node2 tells the other hosts to connect to that, a "
        "loopback address, so they cannot")
    assert check["advice"] == ("on node2, in /etc/hosts, replace '127.0.1.1 node2' with "
                               "'198.18.0.2 node2', or set GLOO_SOCKET_IFNAME=eth0")
    assert check["ranks"]["0"]["detail"] == "node1 resolves to 198.18.0.1"  # no false alarm
    assert "remote=[127.0.1.1]" not in json.dumps(check)
    init = checks_by_id(_report(cluster.hosts[0], path))["setup.init_process_group"]
    assert init["ranks"]["0"]["detail"] == "not attempted: rank 2 on node2 failed " \
        "setup.host_name" or init["ranks"]["0"]["detail"] == "not attempted: rank 3 on " \
        "node2 failed setup.host_name", init  # never waited for a timeout


def test_a_firewall_that_lets_only_the_rendezvous_port_through_is_named_by_the_blocked_host(cluster):
    # node1 accepts new TCP connections from other hosts on the rendezvous port only
    # (29400, what --rdzv-endpoint names), as a firewall opened for it would: torchrun's
    # agent store, which the ranks use (MASTER_PORT), is on a port of its own.
    node1, node2 = cluster.hosts[:2]
    rule = ["INPUT", "-i", "eth0", "-p", "tcp", "--syn", "!", "--dport", "29400",
            "-j", "DROP"]
    node1.run(["iptables", "-A"] + rule)
    try:
        job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", LOOP)),
                               env={"LOOP_MARK": "/tmp/never"})
        t0 = time.monotonic()
        res = job.wait(120)
        took = time.monotonic() - t0
    finally:
        node1.run(["iptables", "-D"] + rule)
    assert [r.code for r in res] == [1, 1], _where(res)
    assert took < TIMEOUT + 30, took
    # node2 cannot reach the store: it says so at once, with the fix, in its own log
    err = res[1].stderr
    assert re.search(r"envcheck: node2: setup.master_port failed: node1:\d+ \(198.18.0.1\) "
                     r"does not answer from node2: nothing came back from 198.18.0.1 on "
                     r"port \d+ \(no answer within 3 s\): a firewall drops the port", err), err
    assert "fix: let node2 connect to 198.18.0.1 on TCP port" in err
    # rank 0 cannot have node2's records (the store is out of its reach): it names the
    # ranks that never said how their checks went, and where to look
    check = checks_by_id(_report(node1, path))["setup.init_process_group"]
    assert check["outcome"] == "failed", check
    assert "ranks 2,3 did not report their pre-checks within 8 s: their host cannot reach " \
           "the job's store at node1:" in check["detail"], check["detail"]
    assert check["advice"].startswith("look at the output of the host those ranks run on")


def test_a_host_killed_mid_collective_is_named_in_rank_0s_report(cluster):
    mark = os.path.join(cluster.shared, "loop-started")
    job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", LOOP)),
                           env={"LOOP_MARK": "/mnt/shared/loop-started"})
    _wait_for(mark)
    cluster.hosts[1].kill_all()  # node2 dies: its agent, its ranks, everything
    t0 = time.monotonic()
    res = job.wait(120)
    took = time.monotonic() - t0
    os.remove(mark)
    assert res[0].code == 1, _where(res)
    assert res[1].code == -9
    report = _report(cluster.hosts[0], path)
    check = checks_by_id(report)["loop.all_reduce"]
    assert check["outcome"] == "crash" and check["root_rank"] in (2, 3), check
    assert "on node2" in check["detail"], check["detail"]
    assert took < TIMEOUT + 30, took


def test_a_host_killed_while_the_others_wait_on_a_live_peer_is_still_the_crash(cluster):
    # Rank 0 outlives node2 waiting in a collective on rank 1 (alive, itself waiting on
    # rank 0 after its error): both receive from node2's rank 2 itself, so both see its
    # connection close. Their watchers' deadlines fall together (each counts from
    # its probe's start), and whichever comes first writes a hang record (waiting inside
    # torch.distributed), often both; the other may be torn down first (a loaded CI
    # node). node2's ranks said nothing at all, and rank 1's error names node2's address. The
    # killed host is the cause, not a hang (a CI run once read this shape, by chance,
    # from the job above). A cut link leaves the same silence, and no such error: a hang
    # (test_a_link_cut_mid_collective_ends_every_rank_within_the_timeout).
    mark = os.path.join(cluster.shared, "loop-started")
    job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", WAIT_ON_A_LIVE_PEER)),
                           env={"LOOP_MARK": "/mnt/shared/loop-started"})
    _wait_for(mark)
    cluster.hosts[1].kill_all()
    t0 = time.monotonic()
    res = job.wait(120)
    took = time.monotonic() - t0
    os.remove(mark)
    assert res[0].code == 1 and res[1].code == -9, _where(res)
    checks = checks_by_id(_report(cluster.hosts[0], path))
    check = checks["loop.recv"]
    # the shape: a survivor's watcher wrote its hang record, waiting on its live peer
    # (rank 0 in recv, in its check; rank 1 in recv after its check, the probe's);
    # node2's ranks left none
    hung = {r: e["last_record"] for c in ("loop.recv", "loop.run") if c in checks
            for r, e in checks[c]["ranks"].items()
            if (e.get("last_record") or {}).get("t") == "hang"}
    assert hung and set(hung) <= {"0", "1"}, hung
    assert all(rec["in_collective"] for rec in hung.values()), hung
    said = check["ranks"]["1"]["error"]["message"]
    assert "[198.18.0.2]:" in said and "by peer" in said, said  # node2's, closed or reset
    assert check["outcome"] == "crash" and check["root_rank"] in (2, 3), check
    assert check["detail"].startswith("rank %d on node2 stopped without a hang record"
                                      % check["root_rank"]), check["detail"]
    assert took < TIMEOUT + 30, took


def test_rank_0s_host_killed_leaves_a_command_on_the_other_host_that_builds_the_report(cluster):
    mark = os.path.join(cluster.shared, "loop-started")
    job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", LOOP)),
                           env={"LOOP_MARK": "/mnt/shared/loop-started"})
    _wait_for(mark)
    cluster.hosts[0].kill_all()  # node1: rank 0, its agent and the job's store
    t0 = time.monotonic()
    res = job.wait(120)
    took = time.monotonic() - t0
    os.remove(mark)
    assert res[0].code == -9 and res[1].code == 1, _where(res)
    assert took < TIMEOUT + 30, took
    out = [line for line in res[1].stderr.splitlines()
           if line.startswith("envcheck: node2: the job failed")]
    assert len(out) == 1 and out[0].endswith("This host's records: envcheck report "
                                             "--records %s" % path.replace("report", "out")
                                             .replace(".json", "")), out
    # that command, on node2, builds the report of what is left, and it is not a pass
    built = cluster.hosts[1].run([sys.executable, "-m", "envcheck", "report", "--records",
                                  path.replace("report", "out").replace(".json", ""),
                                  "--format", "json"], env=dict(os.environ, PYTHONPATH=ROOT),
                                 check=False)
    assert built.returncode == 1, built.stderr
    report = json.loads(built.stdout)
    assert sorted((r["rank"], r["host"]) for r in report["ranks"]
                  if r.get("host")) == [(2, "node2"), (3, "node2")]
    assert "no records from rank(s) 0, 1" in report["plan"]["notes"]


def test_a_link_cut_mid_collective_ends_every_rank_within_the_timeout(cluster):
    mark = os.path.join(cluster.shared, "loop-started")
    job, path = _fault_job(cluster, ("loop", _probe(cluster, "loop.py", LOOP)),
                           env={"LOOP_MARK": "/mnt/shared/loop-started"})
    _wait_for(mark)
    node2 = cluster.hosts[1]
    node2.link(False)
    t0 = time.monotonic()
    agent = job.agents["node2"]
    try:
        first = job.wait(120, hosts=cluster.hosts[:1])
        took = time.monotonic() - t0
        # node2's ranks and watchers end too; only torchrun's own agent stays, blocked
        # on the rendezvous store it cannot reach (torch 2.13), and envcheck says so.
        deadline = time.monotonic() + TIMEOUT + 30
        while node2.processes() != [agent.pid] and time.monotonic() < deadline:
            time.sleep(0.2)
        left = node2.processes()
    finally:
        agent.kill()
        _, err = agent.communicate()
        os.remove(mark)
    assert first[0].code == 1, _where(first)
    assert took < TIMEOUT + 30, took
    assert left == [agent.pid]
    checks = checks_by_id(_report(cluster.hosts[0], path))
    assert checks.get("loop.all_reduce", {}).get("outcome") == "hang", (
        sorted((k, c["outcome"], c["detail"]) for k, c in checks.items()), _where(first))
    # Rank 3 may have sent nothing at all before the cut (seen once): rank 0 still
    # names its host, from what the launch probe learnt.
    assert "envcheck: rank(s) 2,3 on node2 sent no last word within" in first[0].stderr, \
        _where(first)
    assert "node2 cannot reach the job's store at node1:" in err
    assert ("if torchrun's agent here (pid %d) does not exit, it is blocked on its "
            "rendezvous there" % agent.pid) in err


def test_a_host_20_s_late_to_start_simply_succeeds(cluster):
    hosts = cluster.hosts[:2]
    n = next(_jobs)
    job = Torchrun(hosts, 2, ["--out", "/tmp/out-%d" % n, "-p", "launch",
                              "--timeout", str(TIMEOUT)], ROOT, start=False)
    job.start(hosts[0])
    time.sleep(20)
    job.start(hosts[1])
    res = job.wait(120)
    assert [r.code for r in res] == [0, 0], _where(res)


# --- Rank mapping (seed 004): what only differs from the second host on ---

def test_rank_local_rank_and_group_rank_agree_on_three_hosts(cluster):
    res, path = _run(cluster.hosts, ["-p", "launch"])
    assert [r.code for r in res] == [0, 0, 0], _where(res)
    checks = checks_by_id(_report(cluster.hosts[0], path))
    assert checks["launch.rank_mapping"]["outcome"] == "passed"
    assert checks["launch.env"]["outcome"] == "passed"


def test_local_rank_taken_from_the_global_rank_is_caught_on_the_second_host(cluster):
    # The seed's mistake made at launch: a wrapper that exports LOCAL_RANK=$RANK. Right
    # on node1 (ranks 0,1), wrong on node2 (ranks 2,3).
    script = _probe(cluster, "local-from-global.sh",
                    'LOCAL_RANK=$RANK exec "%s" -m envcheck.worker.launched "$@"\n'
                    % sys.executable)
    hosts = cluster.hosts[:2]
    n = next(_jobs)
    report = "/tmp/report-%d.json" % n
    job = Torchrun(hosts, 2, ["--out", "/tmp/out-%d" % n, "--json", report, "-p", "launch"],
                   ROOT, program=["sh", script])
    res = job.wait(240)
    assert [r.code for r in res] == [1, 0], _where(res)
    checks = checks_by_id(_report(hosts[0], report))
    mapping = checks["launch.rank_mapping"]
    assert mapping["outcome"] == "failed"
    assert "host node2 has LOCAL_RANK = RANK ([2, 3]): its local ranks come from the " \
           "global rank" in mapping["detail"], mapping["detail"]
    assert mapping["advice"].startswith(
        "take the local rank from the launcher, never from the global rank: local_rank = "
        "int(os.environ['LOCAL_RANK'])")
    env = checks["launch.env"]
    assert env["outcome"] == "failed" and env["detail"].startswith("ranks 2,3 on node2: ")


def test_the_rendezvous_host_unreachable_at_start_ends_the_other_hosts_ranks(cluster):
    # srun's way (no agent): MASTER_ADDR is node1, whose link is down from the start.
    node1, node2 = cluster.hosts[:2]
    node1.link(False)
    from cluster.jobs import launcher_env
    procs = []
    t0 = time.monotonic()
    for local in (0, 1):
        env = launcher_env(ROOT, RANK=str(2 + local), LOCAL_RANK=str(local), WORLD_SIZE="4",
                           LOCAL_WORLD_SIZE="2", GROUP_RANK="1", MASTER_ADDR="node1",
                           MASTER_PORT="29500")
        procs.append(node2.popen([sys.executable, "-m", "envcheck.worker.launched",
                                  "--out", "/tmp/out-unreachable", "-p", "launch",
                                  "--timeout", str(TIMEOUT)], env=env))
    outs = [p.communicate(timeout=120) for p in procs]
    took = time.monotonic() - t0
    # Every connect gets "No route to host" and torch retries it until the timeout: the
    # watcher ends the wait at the deadline (plus the grace for a rank in a collective).
    # The pre-checks find it before the rendezvous: the store's address does not answer
    # from node2. Each rank stops there (3: setup failed) rather than waiting in
    # init_process_group for the timeout (124), and says why with the fix.
    assert [p.returncode for p in procs] == [3, 3], outs
    assert took < TIMEOUT + 30, took
    err = outs[0][1]
    assert ("envcheck: node2: setup.master_port failed: node1:29500 (198.18.0.1) does not "
            "answer from node2: ") in err, err
    assert "fix: let node2 connect to 198.18.0.1 on TCP port 29500" in err
    assert "setup.socket_interface failed" not in err  # not a second, wrong, diagnosis
    assert ("envcheck: node2: the job failed (rank 2 exited 3); rank 0 prints the "
            "report. This host's records: envcheck report --records /tmp/out-unreachable"
            in err)
    with open(node2.path("/tmp/out-unreachable/records-rank2.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    port = next(r for r in recs if r.get("check") == "master_port")
    assert port["outcome"] == "failed" and port["data"]["address"] == "198.18.0.1"
    assert not any(r["t"] == "hang" for r in recs)


SPAWNY = '''
CHECKS = ("spawn",)


def probe_spawny(ctx):
    """every rank starts three helpers, each hidden deeper, then waits to be stopped"""
    import os
    import subprocess
    import time

    with ctx.check("spawn"):
        subprocess.Popen(["sleep", "6001"])
        subprocess.Popen(["setsid", "sleep", "6002"])
        subprocess.Popen(["setsid", "env", "-i", "sleep", "6003"])
        open(os.path.join(os.environ["SPAWNY_DIR"], "rank%d" % ctx.rank), "w").close()
        time.sleep(600)
'''


def test_sigterm_to_every_hosts_torchrun_leaves_nothing_on_any_host(cluster):
    """A scheduler's cancel: SIGTERM to torchrun on both hosts while each of the 4 ranks
    has three helpers running (a plain child, one in its own session, one in its own
    session with an empty environment). Every rank and helper ends on both hosts (the
    cluster fixture fails a test that leaves a process), and rank 0 still reports.
    (Before launch/enclosure.py: 12 helpers left, 6 on each host, with ppid 1.)"""
    flags = os.path.join(cluster.shared, "spawny-flags")
    os.makedirs(flags, exist_ok=True)
    for name in os.listdir(flags):
        os.remove(os.path.join(flags, name))
    job, path = _fault_job(cluster, ("spawny", _probe(cluster, "spawny.py", SPAWNY)),
                           env={"SPAWNY_DIR": "/mnt/shared/spawny-flags"})
    deadline = time.monotonic() + 120
    while len(os.listdir(flags)) < 4:
        assert time.monotonic() < deadline, "the ranks never started their helpers"
        time.sleep(0.1)
    helpers = {h.name: len(h.processes()) for h in cluster.hosts[:2]}
    for agent in job.agents.values():
        agent.send_signal(15)
    res = job.wait(120)
    assert all(r.code != 0 for r in res), _where(res)
    left = cluster.wait_gone(15.0)
    assert not left, (helpers, left)
    report = _report(cluster.hosts[0], path)
    spawn = checks_by_id(report)["spawny.spawn"]
    assert "terminated by the launcher (SIGTERM)" in spawn["detail"], spawn

"""The bandwidth probe's schedule and judgement (pure), and a real run on one host:
--min-busbw honoured per rank, bad values refused in one line. Across hosts, with a
rate-limited link: tests/test_cluster_bandwidth.py."""

import itertools
import os

import pytest

from conftest import checks_by_id, load_report, run_cli
from envcheck.probes.bandwidth import judge
from envcheck.probes.shared import schedule

pytestmark = pytest.mark.ranks  # every test here starts real ranks


@pytest.mark.parametrize("n", range(2, 10))
def test_every_edge_runs_once_and_no_unit_does_two_things_in_a_phase(n):
    phases = schedule.phases(n)
    flat = [e for p in phases for e in p]
    assert sorted(flat) == sorted(set(schedule.edges(n)))
    assert len(flat) == len(set(flat)) == n * len(schedule.shifts(n))
    for p in phases:
        ends = [u for e in p for u in e]
        assert len(ends) == len(set(ends)), p
    assert len(phases) <= 6  # bounded, whatever the number of hosts


def test_two_hosts_one_edge_each_way_three_hosts_two_peers_each_way():
    assert schedule.phases(2) == [[(0, 1)], [(1, 0)]]
    assert sorted(schedule.edges(3)) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]


def test_units_are_hosts_in_rank_order_or_ranks_on_one_host():
    assert schedule.units_of(["b", "b", "a", "a"]) == ([[0, 1], [2, 3]], ["b", "a"])
    assert schedule.units_of(["h", "h", "h"]) == ([[0], [1], [2]],
                                                  ["rank 0", "rank 1", "rank 2"])


def test_ranks_pair_by_local_index_and_spare_ones_sit_out():
    roles = schedule.roles([[0, 1], [2]], [(0, 1)])
    assert roles == {0: ("send", 2), 2: ("recv", 0)}


def _times(units, phases, seconds_of_edge, repeats=2):
    """times[rank][step] as measure.run gathers them: receivers hold the edge's time."""
    n_ranks = sum(len(u) for u in units)
    times = [[0.0] * (repeats * len(phases)) for _ in range(n_ranks)]
    for r, (p, phase) in itertools.product(range(repeats), enumerate(phases)):
        for a, b in phase:
            for dst in units[b][:len(units[a])]:
                times[dst][r * len(phases) + p] = seconds_of_edge(a, b, r)
    return times


MB = 10 ** 6


def _judge(n_units, seconds_of_edge, min_busbw=None, by_peers=True):
    units = [[2 * u, 2 * u + 1] for u in range(n_units)]
    names = ["node%d" % (u + 1) for u in range(n_units)]
    phases = schedule.phases(n_units)
    rates = judge.edge_rates(units, phases, _times(units, phases, seconds_of_edge), MB)
    out, inb = judge.unit_rates(n_units, rates)
    return judge.judge(names, out, inb, min_busbw, by_peers), out, inb


def test_two_hosts_a_slow_sender_is_named_and_its_receiver_is_not():
    # node2 -> node1 at 10 MB/s; node1 -> node2 at 1 GB/s; each edge's best repeat counts
    slow, out, inb = _judge(2, lambda a, b, r: 0.1 if a == 1 else (0.001 if r else 0.5))
    assert out == [pytest.approx(1.0), pytest.approx(0.01)]
    assert slow == [(1, "out", pytest.approx(0.01), ("peers", pytest.approx(1.0)))]
    names = ["node1", "node2"]
    assert judge.summary(names, slow) == \
        "node2 sends at 0.01 GB/s, 100x below its peers' median 1 GB/s"


def test_three_hosts_a_slow_inbound_link_names_the_receiver_only():
    # every edge into node3 at 10 MB/s: node1 and node2 still send fast to each other
    slow, out, inb = _judge(3, lambda a, b, r: 0.1 if b == 2 else 0.001)
    assert slow == [(2, "in", pytest.approx(0.01), ("peers", pytest.approx(1.0)))]
    assert out == [pytest.approx(1.0)] * 3


def test_a_host_within_a_quarter_of_its_peers_is_not_slow():
    assert _judge(3, lambda a, b, r: 0.0039 if a == 0 else 0.001)[0] == []
    assert _judge(3, lambda a, b, r: 0.0041 if a == 0 else 0.001)[0] == [
        (0, "out", pytest.approx(1 / 4.1), ("peers", pytest.approx(1.0)))]


def test_min_busbw_fails_below_90_percent_of_it_as_nccl_tests_does():
    # 1 GB/s everywhere: 1.1 passes (1.1 * 0.9 < 1), 1.2 does not
    assert _judge(2, lambda a, b, r: 0.001, min_busbw=1.1)[0] == []
    slow = _judge(2, lambda a, b, r: 0.001, min_busbw=1.2)[0]
    assert [(u, why[0]) for u, _, _, why in slow] == [(0, "min"), (1, "min")]
    assert judge.summary(["node1", "node2"], slow) == \
        "node1 sends at 1, node2 sends at 1 GB/s: below --min-busbw 1.2 GB/s"


def test_without_peers_only_min_busbw_judges():
    assert _judge(2, lambda a, b, r: 0.1 if a else 0.001, by_peers=False)[0] == []


# --- one host, for real: 3 ranks (6 edges), then --min-busbw above what it can do ---

def test_one_host_says_it_has_no_peers_and_still_honours_min_busbw(tmp_path):
    path = str(tmp_path / "r.json")
    res = run_cli("run", "-q", "-p", "bandwidth", "--nproc", "3", "--min-busbw", "0.0001",
                  "--json", path)
    assert res.code == 0, res.stdout + res.stderr
    c = checks_by_id(load_report(path))["bandwidth.per_host"]
    assert c["outcome"] == "passed" and c["verdict"] == "ok", c
    assert c["detail"].startswith("send/recv busbw per rank (out/in), GB/s: rank 0 ")
    assert c["detail"].endswith("; 1 host: no other host to compare with; --min-busbw "
                                "0.0001 GB/s met")
    data = c["ranks"]["0"]["data"]
    assert data["unit"] == "rank" and data["names"] == ["rank 0", "rank 1", "rank 2"]
    assert len(data["edges"]) == 6 and all(e["busbw_gbs"] > 0 for e in data["edges"])
    assert data["min_busbw_gbs"] == 0.0001 and data["slow"] == []

    res = run_cli("run", "-q", "-p", "bandwidth", "--min-busbw", "1e6", "--json", path)
    assert res.code == 1, res.stdout + res.stderr
    c = checks_by_id(load_report(path))["bandwidth.per_host"]
    assert c["outcome"] == "failed" and c["verdict"] == "unexpected", c
    assert c["detail"].startswith("rank 0 sends at ")
    assert ", rank 1 sends at " in c["detail"]
    assert "GB/s: below --min-busbw 1000000 GB/s (send/recv busbw per rank" in c["detail"]
    assert "NET/IB, not NET/Socket" in c["advice"]
    assert "bandwidth.per_host" in res.stdout and "below --min-busbw" in res.stdout

    # without --min-busbw there is nothing to judge on one host: skipped, at no cost
    res = run_cli("run", "-q", "-p", "bandwidth", "--json", path)
    assert res.code == 0, res.stdout + res.stderr
    c = checks_by_id(load_report(path))["bandwidth.per_host"]
    assert c["outcome"] == "skipped", c
    assert c["detail"].startswith("1 host: no other host to compare with; --min-busbw "
                                  "GB/S judges each rank's send/recv busbw here")


@pytest.mark.parametrize("value", ["0", "nan", "fast"])
def test_a_bad_min_busbw_is_one_line_and_exit_2_in_both_drivers(value, tmp_path):
    res = run_cli("run", "-p", "bandwidth", "--min-busbw=" + value)
    assert res.code == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        "envcheck: error: --min-busbw %s: a bus bandwidth in GB/s above 0 is needed, as "
        "nccl-tests' NCCL_TESTS_MIN_BW (e.g. --min-busbw 40)" % value]
    import subprocess
    import sys
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    proc = subprocess.run([sys.executable, "-m", "envcheck.worker.launched", "--out",
                           str(tmp_path), "--min-busbw=" + value], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "envcheck: error: --min-busbw %s: a bus bandwidth in GB/s above 0 is needed, as "
        "nccl-tests' NCCL_TESTS_MIN_BW (e.g. --min-busbw 40)" % value]

"""The hosts probe's judgement without a cluster: comparing ranks' facts, the matrix's
word on each finding, clock offsets from readings, and the probe on one machine.
The same checks across real hosts, with real injections: tests/test_cluster_hosts.py."""

import json

import pytest

from conftest import checks_by_id, run_cli
from envcheck.matrix import load as matrix_load, verdicts
from envcheck.report.model import CheckResult, Report
from envcheck.probes.hosts import clock, skew


def _facts(**over):
    f = {"torch": "2.13.0+cpu", "torch_git": "cf30153c4c", "cuda": None, "cudnn": None,
         "nccl": None, "driver": None, "python": "3.11.7", "numpy": "2.4.6", "env": {}}
    env = over.pop("env", {})
    f.update(over)
    f["env"] = env
    return f


HOSTS = ["node1", "node1", "node2", "node2", "node3", "node3"]


def test_the_odd_host_is_the_one_that_differs_from_most_ranks():
    facts = [_facts()] * 2 + [_facts(numpy="2.2.6", env={"NCCL_ALGO": "Ring"})] * 2 + \
        [_facts()] * 2
    findings, odd = skew.compare(facts, HOSTS)
    assert findings == ["numpy differs: 2.2.6 on node2, 2.4.6 on node1, node3",
                        "NCCL_ALGO differs: Ring on node2, unset on node1, node3"]
    assert odd == [2, 3]
    advice = skew.advice(findings, facts, HOSTS, odd)
    assert advice == ("make node2 match the other hosts (numpy, NCCL_ALGO): pip install "
                      "numpy==2.4.6 on node2; unset NCCL_ALGO on node2, as on the other "
                      "hosts (its shell profile, the job script or /etc/nccl.conf sets it)")


def test_two_hosts_that_disagree_name_the_one_without_rank_0():
    facts = [_facts()] * 2 + [_facts(torch="2.12.1+cpu", torch_git="0123456789")] * 2
    findings, odd = skew.compare(facts, HOSTS[:4])
    assert findings == ["torch differs: 2.12.1+cpu on node2, 2.13.0+cpu on node1",
                        "torch git differs: 0123456789 on node2, cf30153c4c on node1"]
    assert odd == [2, 3]


def test_a_secret_that_differs_is_found_but_never_shown():
    a = skew._comparable("<redacted>", "hunter2-secret")
    b = skew._comparable("<redacted>", "other-secret")
    facts = [_facts(env={"TORCH_API_TOKEN": a})] * 2 + [_facts(env={"TORCH_API_TOKEN": b})]
    findings, odd = skew.compare(facts, ["node1", "node2", "node3"])
    assert findings == ["TORCH_API_TOKEN differs: <redacted> on node3, <redacted> on node1, "
                        "node2"]
    assert odd == [2]
    text = json.dumps([findings, skew.advice(findings, facts, ["n1", "n2", "n3"], odd)])
    assert "secret" not in text and a.split("\0")[1] not in text


def _judged(findings):
    m = matrix_load.load()
    ranks = {"0": {"outcome": "failed", "data": {"findings": findings}}}
    c = CheckResult("hosts", "skew", "failed", detail="; ".join(findings),
                    advice="make node2 match the other hosts: ...",
                    error={"type": "CheckFailed", "message": "; ".join(findings)},
                    root_rank=0, ranks=ranks)
    env = {"torch": "2.13.0+cpu", "cuda": None, "python": "3.11.7", "os": "Linux-6.1-x86_64"}
    report = Report("0.1.0", "2026-11-23T00:00:00+00:00", {}, env,
                    [{"rank": 0, "host": "h", "backend": "gloo"}], [c], 1.0)
    return verdicts.apply(report, m).checks[0]


@pytest.mark.parametrize("findings, outcome, verdict, each", [
    (["numpy differs: 2.2.6 on node2, 2.4.6 on node1"], "failed", "known", ["known"]),
    (["NCCL_ALGO differs: Ring on node2, unset on node1"], "failed", "known", ["known"]),
    (["NCCL_DEBUG differs: INFO on node2, unset on node1"], "passed", "ok", ["ok"]),
    (["NCCL differs: 2.21.5 on node2, 2.27.3 on node1"], "failed", "unexpected",
     ["unexpected"]),
    (["torch differs: 2.12.1 on node2, 2.13.0 on node1",
      "numpy differs: 2.2.6 on node2, 2.4.6 on node1",
      "NCCL_DEBUG differs: INFO on node2, unset on node1"], "failed", "unexpected",
     ["unexpected", "known", "ok"]),
])
def test_the_matrix_judges_each_finding(findings, outcome, verdict, each):
    c = _judged(findings)
    assert (c.outcome, c.verdict) == (outcome, verdict)
    assert [f["verdict"] for f in c.expectation["findings"]] == each
    assert all(f["source"] for f in c.expectation["findings"])
    if verdict == "known":  # a warning, and the advice says it is unconfirmed
        assert c.advice.startswith("make node2 match the other hosts, a ")
        assert "(a warning, unconfirmed); " in c.advice and c.advice.endswith(": ...")


def _readings(offset, delay):
    """Readings of a rank whose clock is ``offset`` ahead, ``delay`` s per round trip."""
    return [(100.0 + i + offset, 100.0 + i + offset + delay * (i + 1)) for i in range(5)]


def test_clock_offsets_keep_the_tightest_round_and_the_median_names_the_odd_host():
    stamps = [_readings(0, 0.001), _readings(0, 0.002), _readings(0.002, 0.001),
              _readings(0.002, 0.001), _readings(5.0, 0.001), _readings(5.0, 0.003)]
    per_host = clock.by_host(clock.offsets(stamps), HOSTS)
    assert {h: (round(o, 4), round(b, 4)) for h, (o, b) in per_host.items()} == {
        "node1": (0.0, 0.001), "node2": (0.002, 0.001), "node3": (5.0, 0.001)}
    where, rel, odd = clock.judge(per_host, "node1")
    assert where == "the median of 3 hosts" and odd == ["node3"]
    assert round(rel["node3"][0], 3) == 4.998


def test_clock_with_two_hosts_is_judged_from_rank_0s_host():
    per_host = {"node1": (0.0, 0.001), "node2": (-1.2, 0.3)}
    assert clock.judge(per_host, "node1")[2] == []  # 1.2 s, but ± 0.3: not provably > 1 s
    per_host["node2"] = (-1.5, 0.3)
    assert clock.judge(per_host, "node1")[::2] == ("node1", ["node2"])


@pytest.mark.ranks
def test_one_host_passes_and_skips_the_clock_with_the_reason(tmp_path):
    out = tmp_path / "r.json"
    res = run_cli("run", "-p", "hosts", "--json", str(out))
    assert res.code == 0, res.stdout + res.stderr
    checks = checks_by_id(json.loads(out.read_text()))
    assert checks["hosts.clock"]["outcome"] == "skipped"
    assert checks["hosts.clock"]["detail"].endswith(
        "one clock, no skew to measure (it needs ranks on several hosts)")
    for name in ("skew", "shm", "memlock", "nofile"):
        assert (checks["hosts." + name]["outcome"], checks["hosts." + name]["verdict"]) \
            == ("passed", "ok"), checks["hosts." + name]
    assert checks["hosts.skew"]["detail"].startswith("2 rank(s) on 1 host(s) agree: torch ")


def test_a_known_difference_between_hosts_has_its_own_heading_not_the_code_pitfalls():
    """Another numpy on node2 is a warning about the hosts: the screen lists it under
    its own heading and counts it apart from what the user's code must avoid."""
    from envcheck.render import table

    c = _judged(["numpy differs: 2.2.6 on node2, 2.4.6 on node1"])
    assert c.verdict == "known"
    pickle = CheckResult("serialization", "pickle_default_group", "failed",
                         detail="cannot pickle", verdict="known",
                         advice="a process group cannot be pickled or copied")
    report = Report("0.1.0", "2026-11-23T00:00:00+00:00", {}, {"torch": "2.13.0+cpu"},
                    [{"rank": 0, "host": "h", "backend": "gloo"}], [pickle, c], 1.0)
    lines = table.render(report, width=80).splitlines()
    assert lines[1:3] == ["  nothing unexpected; 1 known torch pitfall your code must avoid "
                          "(below)", "  1 known warning about the hosts (below)"]
    heads = [l for l in lines if l.startswith("Known ")]
    assert heads == ["Known torch pitfalls (1): what your code must avoid; -v: advice, "
                     "sources",
                     "Known warnings about the hosts (1); -v: advice, sources"]
    below = lines[lines.index(heads[1]) + 1]
    assert below.startswith("  ! hosts.skew: make node2 match the other hosts")

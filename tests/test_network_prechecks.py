"""The rendezvous pre-checks' own rules, without a cluster: NCCL's interface choice, what
one host resolved against the others, and each check's verdict on this machine's real
network (the cluster tests, tests/test_cluster_torchrun.py, make the faults for real)."""

import os
import socket

from envcheck.core.network import interfaces as ifs
from envcheck.core.network import prechecks
from envcheck.run.addresses import compare_master_addr


def _iface(name, addrs, loopback=False, up=True):
    return ifs.Interface(name, up, loopback, addrs)


IFACES = {i.name: i for i in (_iface("lo", ["127.0.0.1"], loopback=True),
                              _iface("docker0", ["172.17.0.1"]),
                              _iface("eth0", ["10.0.0.2"]), _iface("eth1", ["10.1.0.2"]),
                              _iface("ib0", ["10.2.0.2"]), _iface("eth2", []))}


def _names(found):
    return [i.name for i in found]


def test_nccl_socket_ifname_follows_nccls_prefix_rules():
    assert _names(ifs.nccl_matches("eth", IFACES)) == ["eth0", "eth1"]  # eth2: no address
    assert _names(ifs.nccl_matches("=eth1", IFACES)) == ["eth1"]
    assert _names(ifs.nccl_matches("=eth", IFACES)) == []
    assert _names(ifs.nccl_matches("^docker,lo", IFACES)) == ["eth0", "eth1", "ib0"]
    assert _names(ifs.nccl_matches("^=eth0", IFACES)) == ["lo", "docker0", "eth1", "ib0"]


def test_nccls_default_prefers_ib_then_anything_but_lo_and_docker():
    assert _names(ifs.nccl_default(IFACES)) == ["ib0"]
    no_ib = {k: v for k, v in IFACES.items() if k != "ib0"}
    assert _names(ifs.nccl_default(no_ib)) == ["eth0", "eth1"]
    only = {k: IFACES[k] for k in ("lo", "docker0")}
    assert _names(ifs.nccl_default(only)) == ["lo", "docker0"]


def _entry(address, local):
    return {"outcome": "passed", "detail": "", "advice": None,
            "data": {"name": "node1", "address": address, "local": local}}


def test_the_host_that_resolves_master_addr_elsewhere_is_named_with_the_address_to_use():
    entries = {0: _entry("127.0.1.1", ["127.0.0.1", "10.0.0.1"]),  # the store's host itself
               2: _entry("10.0.0.1", ["10.0.0.2"]), 4: _entry("10.0.0.9", ["10.0.0.3"])}
    compare_master_addr(entries, {0: "node1", 2: "node2", 4: "node3"})
    assert [entries[r]["outcome"] for r in (0, 2, 4)] == ["passed", "passed", "failed"]
    assert entries[4]["detail"] == ("node3 resolves MASTER_ADDR=node1 to 10.0.0.9, node1, "
                                    "node2 to 10.0.0.1: its ranks look for the rendezvous "
                                    "elsewhere")
    assert entries[4]["advice"].startswith("on node3, make node1 resolve to 10.0.0.1 as on "
                                           "node1, node2")


def test_another_address_of_the_same_host_is_no_disagreement():
    entries = {0: _entry("10.0.0.1", ["10.0.0.1", "10.9.0.1"]),
               2: _entry("10.9.0.1", ["10.0.0.2"])}
    compare_master_addr(entries, {0: "node1", 2: "node2"})
    assert [e["outcome"] for e in entries.values()] == ["passed", "passed"]


def test_two_hosts_that_are_one_machine_agree_whatever_the_loopback_answer():
    """Agents given host names on one machine (tests, --node-rank on one box): one
    resolves MASTER_ADDR to its address, the other to 127.0.0.1; one machine, one store.
    A real second host with a loopback answer is still named (the test above)."""
    entries = {0: _entry("10.0.0.1", ["127.0.0.1", "10.0.0.1"]),
               2: _entry("127.0.0.1", ["127.0.0.1", "10.0.0.1"])}
    compare_master_addr(entries, {0: "nodeA", 2: "nodeB"})
    assert [e["outcome"] for e in entries.values()] == ["passed", "passed"]
    entries = {0: _entry("10.0.0.1", ["127.0.0.1", "10.0.0.1"]),
               2: _entry("127.0.0.1", ["127.0.0.1", "10.0.0.2"])}
    compare_master_addr(entries, {0: "node1", 2: "node2"})
    assert [e["outcome"] for e in entries.values()] == ["passed", "failed"]


def _situation(several, backend="gloo", **env):
    environ = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="1", RANK="0",
                   LOCAL_RANK="0", **env)
    environ.pop("GLOO_SOCKET_IFNAME", None) if "GLOO_SOCKET_IFNAME" not in env else None
    return prechecks.Situation(environ, backend, "here", several, False, 0.0, True)


def test_one_host_checks_names_and_interfaces_only():
    results = {r["check"]: r for r in prechecks.run(_situation(False))}
    assert results["master_addr"]["outcome"] == "passed"
    assert results["master_port"]["outcome"] == "skipped"  # envcheck run's own store
    assert results["host_name"]["outcome"] == "skipped"
    assert results["socket_interface"]["outcome"] == "passed"


def test_an_interface_this_host_lacks_fails_with_the_ones_it_has():
    results = {r["check"]: r for r in prechecks.run(
        _situation(False, GLOO_SOCKET_IFNAME="nosuch9"))}
    r = results["socket_interface"]
    names = [n for n, i in ifs.interfaces().items() if i.addresses]
    assert r["outcome"] == "failed"
    assert r["detail"] == ("GLOO_SOCKET_IFNAME=nosuch9: here has no interface nosuch9 with "
                           "an address (interfaces here: %s)" % ", ".join(names))
    assert r["advice"] == ("on here, unset GLOO_SOCKET_IFNAME, or set it to one of its "
                           "interfaces: %s" % ", ".join(names))


def test_a_port_nothing_listens_on_fails_with_the_firewall_fix():
    with socket.socket() as s:  # a port that was free a moment ago, nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    real = next((n for n, i in ifs.interfaces().items()
                 if not i.loopback and any("." in a for a in i.addresses)), None)
    sit = _situation(True, **({"GLOO_SOCKET_IFNAME": real} if real else {}))
    sit.own_store, sit.port = False, port
    sit.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"  # torchrun: the store is up first
    results = {r["check"]: r for r in prechecks.run(sit)}
    r = results["master_port"]
    assert r["outcome"] == "failed"
    assert r["detail"].startswith("127.0.0.1:%d does not answer from here: 127.0.0.1 answered "
                                  "but nothing listens on port %d: torchrun's rendezvous "
                                  "store is not there" % (port, port))
    if real:  # an interface that is fine: no second diagnosis while nothing answers
        assert results["socket_interface"]["outcome"] == "skipped", results
        assert "(see master_port)" in results["socket_interface"]["detail"]

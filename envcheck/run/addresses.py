"""The rendezvous pre-checks across ranks: what one host resolved against the others.

Each rank records the address MASTER_ADDR resolved to on its host, and its host's own
addresses (``setup.master_addr``'s data; core/network/prechecks.py). Two hosts agree
when they reach the same host: the same address, or addresses of one host (a loopback
answer on the host that holds the store, or another of its interfaces). The hosts in
the minority are named; a tie names every host but the one holding rank 0.
"""

from ..core.network.prechecks import PEER_PRECHECK_FAILED, PRECHECK_FAILED
from ..core.network.lookup import is_loopback

NOT_ATTEMPTED = (PRECHECK_FAILED, PEER_PRECHECK_FAILED)


def _target(entry, host, owners):
    data = entry.get("data") or {}
    address = data.get("address")
    if not address:
        return None
    if is_loopback(address):
        # This host itself, known by its addresses: "hosts" that share them are one
        # machine (a test's, or a launcher's --node-rank on one box), whose loopback
        # answers all reach the same store.
        mine = [a for a in data.get("local") or () if not is_loopback(a) and a in owners]
        return ("host", owners[mine[0]] if mine else host)
    return ("host", owners[address]) if address in owners else ("address", address)


def compare_master_addr(entries, host_of):
    """Mark the ranks whose host resolved MASTER_ADDR to another place than the rest;
    ``entries`` is {rank: entry} of ``setup.master_addr`` (changed in place)."""
    if not entries:
        return
    owners = {}
    for rank, entry in entries.items():
        for a in (entry.get("data") or {}).get("local") or ():
            if not is_loopback(a):
                owners.setdefault(a, host_of.get(rank))
    targets = {}
    for rank, entry in entries.items():
        if entry.get("outcome") != "passed":
            continue
        t = _target(entry, host_of.get(rank), owners)
        if t is not None:
            targets.setdefault(t, []).append(rank)
    if len(targets) < 2:
        return
    ranked = sorted(targets.items(), key=lambda kv: (-len(kv[1]), 0 in kv[1]))
    majority = next((t for t, ranks in ranked if 0 in ranks), ranked[0][0]) \
        if len(ranked[0][1]) == len(ranked[1][1]) else ranked[0][0]
    # The address to advise: one that is not a loopback answer (that one works only on
    # the host that holds the store).
    found = [entries[r]["data"].get("address") for r in targets[majority]]
    usual_address = next((a for a in found if not is_loopback(a)), None) or next(
        (a for a, h in owners.items() if ("host", h) == majority), found[0])
    usual_hosts = sorted({host_of.get(r, "?") for r in targets[majority]})
    for t, ranks in targets.items():
        if t == majority:
            continue
        for rank in ranks:
            entry, data = entries[rank], entries[rank]["data"]
            host = host_of.get(rank, "?")
            entry["outcome"] = "failed"
            entry["detail"] = ("%s resolves MASTER_ADDR=%s to %s, %s to %s: its ranks look "
                               "for the rendezvous elsewhere" % (
                                   host, data.get("name"), data.get("address"),
                                   ", ".join(usual_hosts), usual_address))
            entry["advice"] = ("on %s, make %s resolve to %s as on %s (/etc/hosts or DNS: "
                               "getent hosts %s), or set MASTER_ADDR=%s on every host" % (
                                   host, data.get("name"), usual_address,
                                   ", ".join(usual_hosts), data.get("name"),
                                   usual_address))

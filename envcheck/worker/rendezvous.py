"""The rendezvous pre-checks in a rank: run them, record them, and agree on them.

``core.network.prechecks`` does the checking (stdlib only). Here a rank runs them
between ``setup_start`` and ``init_process_group``, writes each as a check of the
pseudo-probe ``setup``, and, in launcher mode, tells the others through the launcher's
store (``relay.connect``: torchrun's agent store, or rank 0's under srun) whether it
may go on. A failure anywhere then ends every rank that can reach the store in
seconds, each naming the rank and host that failed, instead of the others waiting in
``init_process_group`` until its timeout (torch's default: 30 minutes).

Keys, under ``envcheck/RUN/pre/``: ``n`` (ranks that are done, by ``add``), ``failed``
(the first failing rank's "RANK HOST CHECK"), ``ok/R``, and ``verdict``: set by the
first rank that failed, or by the last rank to pass. Every rank waits on ``verdict``
inside the store (``wait``): no polling, so a rank costs the store three calls however
long the slowest host takes (a poll every 20 ms did cost 100 calls a second a rank:
docs/scale.md).
"""

import datetime
import os
import sys
import time

from ..launch import contain
from ..core.network import prechecks as checks_mod
from ..core.text import first_line, rank_numbers

PRECHECK_FAILED, PEER_PRECHECK_FAILED = checks_mod.PRECHECK_FAILED, checks_mod.PEER_PRECHECK_FAILED


def situation(plan, host, identity, backend, environ=os.environ):
    rank, local_rank, world_size, local_world_size = identity
    own_store = bool(environ.get(contain.MARKER))
    store_here = (not own_store and rank == 0
                  and environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True")
    return checks_mod.Situation(environ, backend, host, local_world_size < world_size,
                                store_here, float(plan["timeout"]) * 0.5, own_store,
                                world_size, local_world_size)


def run(plan, records, host, identity, backend):
    """Every pre-check, recorded; returns the error for the setup record, or None."""
    rank, local_rank, world_size, _ = identity
    results = checks_mod.run(situation(plan, host, identity, backend))
    if os.environ.get(contain.MARKER):
        # envcheck run: one host, its own store; what does not apply there (the store's
        # port, the host's name as others see it) is left out rather than listed skipped
        results = [r for r in results if r["outcome"] != "skipped"]
    failed = [r for r in results if r["outcome"] == "failed" and r["fatal"]]
    for r in results:
        records.write("check", probe="setup", check=r["check"], outcome=r["outcome"],
                      seconds=r["seconds"], detail=r["detail"], advice=r["advice"],
                      data=r["data"])
    if failed and local_rank == 0 and not os.environ.get(contain.MARKER):
        # This host's one line, in the launcher's log, whatever becomes of the report.
        for r in failed:
            sys.stderr.write("envcheck: %s: setup.%s failed: %s\n  fix: %s\n" % (
                host, r["check"], r["detail"], r["advice"]))
        sys.stderr.flush()
    mine = ("%d %s %s" % (rank, host, failed[0]["check"])) if failed else None
    other = None
    unreachable = any(r["check"] in ("master_addr", "master_port") for r in failed)
    if not os.environ.get(contain.MARKER) and world_size > 1 and not unreachable:
        other = _agree(plan, identity, mine)
    if failed:
        return {"type": PRECHECK_FAILED, "traceback": None,
                "message": "not attempted: setup.%s failed on %s: %s" % (
                    failed[0]["check"], host, first_line(failed[0]["detail"]))}
    if other and other[0] == "failed":
        peer, peer_host, check = (other[1].split(" ", 2) + ["?", "?"])[:3]
        return {"type": PEER_PRECHECK_FAILED, "traceback": None,
                "message": "not attempted: rank %s on %s failed setup.%s" % (
                    peer, peer_host, check)}
    if other:
        silent = other[1]
        return {"type": checks_mod.PEERS_SILENT, "traceback": None,
                "message": "rank%s %s did not report their pre-checks within %.0f s: their "
                           "host cannot reach the job's store at %s:%s, or they are still "
                           "starting" % (
                               "s" if len(silent) > 1 else "", rank_numbers(silent),
                               float(plan["timeout"]) * 0.8, os.environ.get("MASTER_ADDR"),
                               os.environ.get("MASTER_PORT"))}
    return None


def _agree(plan, identity, mine):
    """Post this rank's verdict to the store and wait for every rank's, or for the first
    failure. Returns None (every rank may go on), ("failed", "RANK HOST CHECK"), or
    ("silent", [ranks]) for ranks that never posted within the bound: their host cannot
    reach the store (their own output says why)."""
    from . import relay

    rank, _, world_size, _ = identity
    timeout = float(plan["timeout"])
    # Ends before the watcher's deadline for the setup phase, so the rank says it.
    deadline = time.monotonic() + timeout * 0.8
    try:
        store = relay.connect(rank, world_size, checks_mod.CONNECT_S,
                              relay.hosts_store(os.environ, rank))
        keys = relay.prefix(_run_id()) + "pre/"
        if mine is not None:
            if store.add(keys + "nfailed", 1) == 1:
                store.set(keys + "failed", mine)
                store.set(keys + "verdict", b"failed")
            return None
        store.set(keys + "ok/%d" % rank, b"1")
        if store.add(keys + "n", 1) >= world_size:
            store.set(keys + "verdict", b"ok")
        try:
            store.wait([keys + "verdict"], datetime.timedelta(
                seconds=max(0.001, deadline - time.monotonic())))
        except Exception:  # the deadline: who never posted?
            silent = [r for r in range(world_size)
                      if not store.check([keys + "ok/%d" % r])]
            return ("silent", silent) if silent else None
        if store.check([keys + "failed"]):
            return "failed", store.get(keys + "failed").decode("utf-8", "replace")
        return None
    except Exception:
        return None  # the store's trouble is master_port's to report, not this


def _run_id():
    from .identity import run_id
    return run_id(os.environ)

"""What envcheck's launcher mode costs the job's c10d store, from 2 hosts to as many as
this machine holds, and whether torchrun's own rendezvous and barrier feel it.

In launcher mode every host sends its ranks' records to the store torchrun's agent
hosts (MASTER_ADDR:MASTER_PORT), which also serves torchrun's rendezvous and every
rank's ``init_process_group``. This bench drives a real ``torch.distributed.TCPStore``
server (one process, as the agent's) with simulated ranks that make exactly the calls
envcheck's ranks made in a real run (same keys, sizes and timing), and measures the
store while torchrun's real rendezvous code (``DynamicRendezvousHandler`` over
``C10dRendezvousBackend``, one agent per simulated host) and its store barrier
(``torch.distributed.elastic.utils.store.barrier``) run against it.

1. ``--trace``: run a real 2-host job (two torchrun agents on this machine, 8 ranks
   each), with ``bench/store_trace`` logging every TCPStore call of every process; once
   with this checkout's envcheck and once with another (``--old DIR``, a checkout of
   the previous design). Writes ``bench/store_profile.json``: each rank's calls (time,
   op, key, bytes), its rank in the key replaced by ``{r}``.
2. (default) For each job size (``--hosts``, 8 ranks a host) and design (``none``: no
   envcheck; ``old``; ``new``): a fresh store server; simulated ranks replay the
   profile in a loop (rank k replays the traced rank k mod 16, with its own keys), each
   starting at a random point of the job's life; then torchrun's rendezvous of one
   agent a simulated host (``--agents`` at most) and its barrier, ``--trials`` times,
   while a probe client (a process of its own) times a ``get`` every 5 ms. Measured:
   the calls and bytes envcheck sent a second (total and a host), the server process's
   CPU a second, the probe's latency (median, p99), the rendezvous's and barrier's
   seconds. The largest size runs its designs in turns, trial by trial (paired). Every
   simulated client runs on this machine's 2 cores, beside the agents: the old design's
   calls cost the agents CPU here that on a cluster other hosts would spend
   (docs/scale.md reads the figures with that in mind).
3. ``--flood``: the store's ceiling here: every client as fast as it can.

    python bench/store_load.py --trace --old /tmp/envcheck-old     # ~1 min
    python bench/store_load.py [--hosts 2,8,32,128] [--seconds 10]   # ~5 min
    python bench/store_load.py --flood

Figures and what they predict for 1,000 and 10,000 hosts: docs/scale.md.
"""

import argparse
import ast
import datetime
import glob
import heapq
import json
import os
import random
import re
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from envcheck.launch import procs  # noqa: E402  (the one place processes are made)

PROFILE = os.path.join(HERE, "store_profile.json")
RANKS_PER_HOST = 8
GAP_S = 1.0  # between two lives of a simulated job
LATE_S = 0.05  # a call this much behind its time: the load processes fell behind
# torch's C++ warnings (one per connection at a hundred clients) would bury the figures
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
RUN = "torchrun:x"  # the traced job's run id, in its keys
# envcheck's keys that name a rank: that number becomes {r}, the replaying rank's own
RANK_KEY = re.compile(r"(rec|h|ok|final|done|stacks)/(\d+)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _store(port, master=False, timeout=30):
    import torch.distributed as dist
    return dist.TCPStore("127.0.0.1", port, 1, master,
                         datetime.timedelta(seconds=timeout), wait_for_workers=False)


# --- 1. the trace of a real job --------------------------------------------------------

def _trace_job(code, work, nproc):
    """Two torchrun agents on this machine, ``nproc`` ranks each, the default suite;
    every TCPStore call logged under ``work/t``."""
    port = _free_port()
    agents = []
    for node in (0, 1):
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
        env.update(ENVCHECK_HOST="node%d" % node, ENVCHECK_STORE_TRACE=os.path.join(work, "t"),
                   PYTHONPATH=os.pathsep.join([os.path.join(HERE, "store_trace"), code]))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
               "--node-rank", str(node), "--nproc-per-node", str(nproc),
               "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:%d" % port,
               "--rdzv-id", RUN.split(":")[1], "-m", "envcheck.worker.launched",
               "--out", os.path.join(work, "out"), "--json", os.path.join(work, "r.json"),
               "--timeout", "120"]
        agents.append(procs.popen(cmd, env=env, cwd=work, stdout=procs.DEVNULL,
                                  stderr=procs.DEVNULL))
    codes = [a.wait(600) for a in agents]
    if codes != [0, 0]:
        raise RuntimeError("the traced job failed: %s (see %s)" % (codes, work))


def _ranks_of(work):
    """Each rank process's envcheck calls, as the replay wants them: times from the
    job's first call, so that a rank that calls only at its start is replayed at the
    job's pace, not in a loop of its own."""
    actors = []
    for path in glob.glob(os.path.join(work, "t", "*.jsonl")):
        with open(path) as f:
            rows = [json.loads(line) for line in f]
        rows = [r for r in rows if "envcheck/" in r["key"]]
        if not rows:
            continue
        rank = None
        for r in rows:
            m = RANK_KEY.search(r["key"])
            if m and m.group(1) in ("rec", "ok"):
                rank = int(m.group(2))
                break
        if rank is None:
            continue
        ops = []
        for r in rows:
            key = r["key"]
            keys = ast.literal_eval(key) if key.startswith("[") else [key]
            keys = [RANK_KEY.sub(lambda m, rank=rank: "%s/{r}" % m.group(1)
                                 if int(m.group(2)) == rank else m.group(0), k)
                    .replace(RUN, "{run}") for k in keys]
            ops.append([r["t"], r["op"], keys, r["sent"]])
        actors.append({"rank": rank, "ops": ops})
    t0 = min(a["ops"][0][0] for a in actors)
    span = max(a["ops"][-1][0] for a in actors) - t0
    for a in actors:
        a["span"] = round(span, 4)  # the job's, the same for every rank
        for op in a["ops"]:
            op[0] = round(op[0] - t0, 4)
    return sorted(actors, key=lambda a: a["rank"])


def trace(args):
    profile = {"ranks_per_host": RANKS_PER_HOST, "hosts": 2, "designs": {},
               "how": "python bench/store_load.py --trace: two torchrun agents on one "
                      "machine, %d ranks each, the default suite" % RANKS_PER_HOST}
    for design, code in (("new", ROOT), ("old", args.old)):
        if not code:
            continue
        for _ in range(3):  # on a loaded machine a job may time out: again
            work = tempfile.mkdtemp(prefix="envcheck-trace-%s-" % design)
            try:
                _trace_job(code, work, RANKS_PER_HOST)
                break
            except RuntimeError as exc:
                print(exc)
        else:
            raise SystemExit("no traced job passed")
        actors = _ranks_of(work)
        label = args.old_label if design == "old" else "this checkout"
        profile["designs"][design] = {"code": label or code, "actors": actors}
        calls = sum(len(a["ops"]) for a in actors)
        print("%s: %d ranks, %d envcheck calls, %d bytes" % (
            design, len(actors), calls, sum(o[3] for a in actors for o in a["ops"])))
    with open(PROFILE, "w") as f:
        json.dump(profile, f, indent=0)
    print("wrote", PROFILE)


# --- 2. the replay: simulated ranks ----------------------------------------------------

def _replay(port, actors, seconds, seed, out):
    """One thread: its actors' calls on one connection, each at its time; a call that
    comes late goes at once (counted when over ``LATE_S``)."""
    store = _store(port)
    rng = random.Random(seed)
    payload = os.urandom(1 << 20)
    queue = []
    start = time.monotonic()
    for k, actor in actors:
        cycle = actor["span"] + GAP_S
        begin = start - rng.uniform(0, cycle)  # somewhere in the job's life
        i = next((n for n, o in enumerate(actor["ops"]) if begin + o[0] >= start), None)
        if i is None:  # its calls this time round are over: its next life
            i, begin = 0, begin + cycle
        heapq.heappush(queue, (begin + actor["ops"][i][0], k, i, begin))
    stats = {"calls": 0, "bytes": 0, "late": 0, "errors": 0}
    by_rank = dict(actors)
    end = start + seconds
    while queue:
        due, k, i, begin = heapq.heappop(queue)
        if due >= end:
            break
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        elif now - due > LATE_S:
            stats["late"] += 1
        actor = by_rank[k]
        _, op, keys, size = actor["ops"][i]
        keys = [key.format(r=k, run=RUN) for key in keys]
        try:
            if op == "set":
                store.set(keys[0], payload[:size])
            elif op == "add":
                store.add(keys[0], 1)
            elif op == "check":
                store.check(keys)
            elif op == "wait":  # its key is there: a round trip, as a wait that ends
                store.wait(keys, datetime.timedelta(seconds=60))
            elif op == "get":
                if store.check(keys):
                    store.get(keys[0])
        except Exception:  # a call that timed out on a starved machine: counted
            stats["errors"] += 1
        stats["calls"] += 1
        stats["bytes"] += size
        i += 1
        if i == len(actor["ops"]):
            i, begin = 0, begin + actor["span"] + GAP_S
        heapq.heappush(queue, (begin + actor["ops"][i][0], k, i, begin))
    out.append(stats)


def load_worker(args):
    """A process of simulated ranks (``--ranks A:B``), ``--threads`` connections."""
    with open(PROFILE) as f:
        design = json.load(f)["designs"][args.design]
    traced = {a["rank"]: a for a in design["actors"]}
    n = 2 * RANKS_PER_HOST  # the traced job's ranks
    first, last = map(int, args.ranks.split(":"))
    mine = [(k, traced[k % n]) for k in range(first, last) if (k % n) in traced]
    # every key a rank waits on is there already: the replay never blocks on a peer
    store = _store(args.port)
    for _, actor in mine:
        for _, op, keys, _ in actor["ops"]:
            if op == "wait":
                for key in keys:
                    store.set(key.format(r=0, run=RUN), b"ok")
    out, threads = [], []
    for t in range(args.threads):
        share = mine[t::args.threads]
        if share:
            threads.append(threading.Thread(target=_replay, args=(
                args.port, share, args.seconds, args.seed * 100 + t, out)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"calls": sum(s["calls"] for s in out),
                      "bytes": sum(s["bytes"] for s in out),
                      "late": sum(s["late"] for s in out),
                      "errors": sum(s["errors"] for s in out)}))


# --- torchrun's own: rendezvous and barrier --------------------------------------------

def _rendezvous_and_barrier(port, hosts, trial):
    """One agent a host, each its own connection: torchrun's rendezvous (c10d backend),
    then its store barrier. Seconds of each, the slowest agent's."""
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import \
        C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import \
        DynamicRendezvousHandler, RendezvousTimeout
    from torch.distributed.elastic.utils import store as store_util

    run_id = "bench-%d-%d" % (os.getpid(), trial)
    done = {"rdzv": [], "barrier": []}
    stores = [_store(port, timeout=300) for _ in range(hosts)]
    handlers = [DynamicRendezvousHandler.from_backend(
        run_id, s, C10dRendezvousBackend(s, run_id), hosts, hosts,
        timeout=RendezvousTimeout(join=datetime.timedelta(seconds=300)))
        for s in stores]
    gate = threading.Barrier(hosts + 1)

    def agent(i):
        gate.wait()
        t0 = time.monotonic()
        handlers[i].next_rendezvous()
        t1 = time.monotonic()
        store_util.barrier(stores[i], hosts, "bench-barrier-%s" % run_id, 300)
        done["rdzv"].append(t1 - t0)
        done["barrier"].append(time.monotonic() - t1)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(hosts)]
    for t in threads:
        t.start()
    gate.wait()
    for t in threads:
        t.join()
    for h in handlers:
        try:
            h.shutdown()
        except Exception:
            pass
    return max(done["rdzv"]), max(done["barrier"])


def probe_worker(args):
    """A process of its own (the agents' threads would hold its GIL): a ``get`` every
    5 ms until its stdin closes; the latencies' median and p99."""
    store = _store(args.port)
    store.set("bench/probe", b"x" * 64)
    stop, lat = threading.Event(), []

    def loop():
        while not stop.is_set():
            t0 = time.perf_counter()
            store.get("bench/probe")
            lat.append(time.perf_counter() - t0)
            time.sleep(0.005)

    thread = threading.Thread(target=loop)
    thread.start()
    print("up", flush=True)
    sys.stdin.read()
    stop.set()
    thread.join()
    lat.sort()
    print(json.dumps({"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)]}
                     if lat else {}), flush=True)


def _cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server(port):
    code = ("import datetime, sys, time, torch.distributed as d; "
            "s = d.TCPStore('127.0.0.1', %d, 1, True, datetime.timedelta(seconds=60), "
            "wait_for_workers=False); print('up', flush=True); sys.stdin.read()" % port)
    proc = procs.popen([sys.executable, "-c", code], stdin=procs.PIPE, stdout=procs.PIPE,
                       text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def measure(design, hosts, args, trials):
    """One fresh store, ``design``'s load from ``hosts`` hosts, ``trials`` rendezvous."""
    port = _free_port()
    server = _server(port)
    workers = []
    try:
        ranks = hosts * RANKS_PER_HOST
        if design != "none":
            per = -(-ranks // args.workers)
            for w in range(args.workers):
                a, b = w * per, min(ranks, (w + 1) * per)
                if a < b:
                    workers.append(procs.popen([
                        sys.executable, __file__, "--load-worker", "--port", str(port),
                        "--design", design, "--ranks", "%d:%d" % (a, b),
                        "--threads", str(args.threads), "--seconds", str(args.seconds),
                        "--seed", str(w)], stdout=procs.PIPE, text=True))
        time.sleep(args.warmup)
        cpu0, t0 = _cpu_s(server.pid), time.monotonic()
        probe = procs.popen([sys.executable, __file__, "--probe-worker", "--port", str(port)],
                            stdin=procs.PIPE, stdout=procs.PIPE, text=True)
        workers.append(probe)
        assert probe.stdout.readline().strip() == "up"
        agents = min(hosts, args.agents)
        rdzv = [_rendezvous_and_barrier(port, agents, n) for n in range(trials)]
        left = args.seconds - args.warmup - (time.monotonic() - t0) - 1
        if left > 0:
            time.sleep(left)
        lat = json.loads(probe.communicate("", timeout=60)[0])
        cpu = (_cpu_s(server.pid) - cpu0) / (time.monotonic() - t0)
        loads = [json.loads(w.communicate(timeout=args.seconds + 120)[0])
                 for w in workers if w is not probe]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        server.stdin.close()
        server.wait(30)
    calls = sum(x["calls"] for x in loads) / args.seconds
    sent = sum(x["bytes"] for x in loads) / args.seconds
    return {"design": design, "hosts": hosts, "ranks": hosts * RANKS_PER_HOST,
            "agents": agents,
            "calls_s": round(calls), "calls_s_host": round(calls / hosts, 1),
            "bytes_s_host": round(sent / hosts), "server_cpu": round(cpu, 3),
            "late": round(sum(x["late"] for x in loads) / max(1, sum(
                x["calls"] for x in loads)), 4),
            "errors": sum(x.get("errors", 0) for x in loads),
            "get_ms_p50": round(1e3 * lat["p50"], 3) if lat else None,
            "get_ms_p99": round(1e3 * lat["p99"], 3) if lat else None,
            "rdzv_s": [round(r, 3) for r, _ in rdzv],
            "barrier_s": [round(b, 3) for _, b in rdzv]}


def bench(args):
    sizes = [int(h) for h in args.hosts.split(",")]
    designs = args.designs.split(",")
    rows = []
    for hosts in sizes[:-1]:
        for design in designs:
            rows.append(measure(design, hosts, args, 1))
            print(json.dumps(rows[-1]), flush=True)
    # the largest: the designs in turns, so that each trial's conditions are paired
    for turn in range(args.trials):
        for design in designs:
            rows.append(dict(measure(design, sizes[-1], args, 1), turn=turn))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


# --- 3. the ceiling --------------------------------------------------------------------

def flood(args):
    """Every client as fast as it can: 1 KiB sets and adds, half each."""
    port = _free_port()
    server = _server(port)
    workers = []
    try:
        code = ("import datetime, os, sys, threading, time, torch.distributed as d\n"
                "def go(n):\n"
                "    s = d.TCPStore('127.0.0.1', %d, 1, False, datetime.timedelta(seconds=60),"
                " wait_for_workers=False)\n"
                "    end, v, c = time.monotonic() + %f, b'x' * 1024, 0\n"
                "    while time.monotonic() < end:\n"
                "        s.set('f/%%d' %% n, v); s.add('f/n', 1); c += 2\n"
                "    out.append(c)\n"
                "out = []\n"
                "ts = [threading.Thread(target=go, args=(i,)) for i in range(%d)]\n"
                "[t.start() for t in ts]; [t.join() for t in ts]; print(sum(out))\n"
                % (port, args.seconds, args.threads))
        cpu0, t0 = _cpu_s(server.pid), time.monotonic()
        workers = [procs.popen([sys.executable, "-c", code], stdout=procs.PIPE, text=True)
                   for _ in range(args.workers)]
        calls = sum(int(w.communicate(timeout=args.seconds + 60)[0]) for w in workers)
        took = time.monotonic() - t0
        cpu = _cpu_s(server.pid) - cpu0
    finally:
        server.stdin.close()
        server.wait(30)
    print(json.dumps({"flood_calls_s": round(calls / args.seconds),
                      "server_cpu_s_per_s": round(cpu / took, 3),
                      "server_us_per_call": round(1e6 * cpu / calls, 2),
                      "clients": args.workers * args.threads}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", action="store_true")
    p.add_argument("--old", help="--trace: a checkout of the previous design")
    p.add_argument("--old-label", help="--trace: what --old is (a commit), for the profile")
    p.add_argument("--flood", action="store_true")
    p.add_argument("--hosts", default="2,8,32,128")
    p.add_argument("--designs", default="none,old,new")
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--trials", type=int, default=3, help="paired turns at the largest size")
    p.add_argument("--workers", type=int, default=3, help="load processes")
    p.add_argument("--agents", type=int, default=128,
                   help="torchrun agents in the rendezvous, at most (256 Python threads "
                        "took over 5 minutes to meet on 2 cores) [%(default)s]")
    p.add_argument("--threads", type=int, default=16, help="connections a load process")
    p.add_argument("--json", help="write every row here")
    # a load process of the bench itself
    p.add_argument("--load-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--design", help=argparse.SUPPRESS)
    p.add_argument("--ranks", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.load_worker:
        load_worker(args)
    elif args.probe_worker:
        probe_worker(args)
    elif args.trace:
        trace(args)
    elif args.flood:
        flood(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()

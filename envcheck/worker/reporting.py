"""Launcher mode's one report: every rank's records on rank 0, judged by envcheck's CLI.

After the last probe rank 0 gathers every rank's records through the process group
(``gather_records``: tensors only, all_gather_object needs numpy in some torch builds)
and writes them to ``DIR/records.jsonl``. The worker side may import only the stdlib and
torch, so the report itself is built where envcheck is installed: ``envcheck report
--records ...``, run by rank 0 as a helper process (``render_report``) when this
interpreter, or an ``envcheck`` on PATH, has envcheck's dependencies. Its exit code is
rank 0's. Rank 0 starts that helper as it starts itself (``start_report``), so that its
imports and the matrix are done before the probes end: every other host waits for
rank 0 then.

After a bad end, rank 0's watcher builds the report from what the store relayed
(``prefer_local``, ``ranks_on_hosts``: who never sent a last word), and a host without
rank 0 prints one line saying where its records are (``agent_line``).
"""

import ctypes
import os
import shutil
import sys

from ..core import records as records_mod
from ..core.outcomes import RankExit
from ..core.records import records_path
from ..core.text import printable
from ..launch import procs
from . import watcher as watcher_mod


def gather_records(ctx, path):
    """Every rank's record file, as bytes, on rank 0 (None elsewhere); tensors only."""
    import torch
    import torch.distributed as dist

    with open(path, "rb") as f:
        data = f.read()
    size = torch.tensor([len(data)], dtype=torch.int64, device=ctx.device)
    sizes = [torch.zeros_like(size) for _ in range(ctx.world_size)]
    dist.all_gather(sizes, size)
    sizes = [int(s.item()) for s in sizes]
    buf = torch.zeros(max(max(sizes), 1), dtype=torch.uint8)
    if data:
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    buf = buf.to(ctx.device)
    if ctx.rank != 0:
        dist.gather(buf, dst=0)
        return None
    out = [torch.empty_like(buf) for _ in range(ctx.world_size)]
    dist.gather(buf, gather_list=out, dst=0)
    result = []
    for t, n in zip(out, sizes):
        t = t.cpu().contiguous()
        result.append(ctypes.string_at(t.data_ptr(), n))  # no numpy needed
    return result


def _failed_checks(chunks):
    """How many checks failed on some rank, from the gathered record streams."""
    failed = set()
    for chunk in chunks:
        records, _ = records_mod.parse(chunk.decode("utf-8", "replace"))
        failed.update((r.get("probe"), r.get("check")) for r in records
                      if r["t"] in ("check", "setup") and r.get("outcome") == "failed")
    return len(failed)


def _missing_dependencies(stderr):
    return "ModuleNotFoundError" in stderr or "No module named" in stderr


def _report_commands(args, merged):
    """Where the report can be built: this interpreter, else an envcheck on PATH (a
    pipx install, say) when this one lacks envcheck's own dependencies."""
    tail = ["report", "--records", merged, "--format", args.format]
    if args.verbose:
        tail.append("--verbose")
    if args.json_path:
        tail += ["--json", args.json_path]
    if args.junit_path:
        tail += ["--junit", args.junit_path]
    yield [sys.executable, "-m", "envcheck"] + tail
    found = shutil.which("envcheck")
    if found:
        yield [found] + tail


def _on_terminal():
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def start_report(args):
    """Rank 0, as it starts: the report helper (this interpreter's envcheck), started
    now so that its imports and the matrix are done while the probes run; it then waits
    for the records' path on its stdin (``envcheck report --records-on-stdin``). That
    takes its start off the end of the job, where every other host waits for rank 0.
    None where it cannot start; ``render_report`` then starts one as before."""
    cmd = next(_report_commands(args, "-"))
    cmd[cmd.index("--records"):cmd.index("--records") + 2] = ["--records-on-stdin"]
    try:
        return watcher_mod.start_helper(cmd, stdout=None if _on_terminal()
                                        else procs.PIPE)
    except OSError:
        return None


def _finish_helper(proc, records, timeout):
    """The started helper, given the records' path: a CompletedProcess (what it said
    when it ended before: this interpreter lacks envcheck's dependencies, say)."""
    try:
        out, err = proc.communicate(None if proc.poll() is not None else records + "\n",
                                    timeout=timeout)
    except (BrokenPipeError, ValueError):  # it ended as the path was written
        out, err = proc.communicate(timeout=timeout)
    except procs.TimeoutExpired:
        procs.kill_popen(proc)
        proc.communicate()
        raise
    return procs.CompletedProcess(proc.args, proc.returncode, out, err)


def render_report(args, records, started=None):
    """Rank 0: build and judge the report with envcheck's CLI, as envcheck run would
    (``started``: the helper ``start_report`` started early).

    Returns its exit code, or None where no envcheck with its dependencies can be found
    (this interpreter lacks them and none is on PATH).
    """
    terminal = _on_terminal()
    sys.stdout.flush()
    for cmd in _report_commands(args, records):
        try:
            # On a terminal the helper writes to it itself, so that its screen is fitted
            # to it and coloured, as envcheck run's is (an envcheck that lacks its
            # dependencies fails on import, before it writes any of it).
            proc = _finish_helper(started, records, 300) if started else None
            started = None
            if proc is None:
                proc = watcher_mod.run_helper(cmd, 300, stdout=None if terminal
                                              else procs.PIPE)
        except (OSError, procs.TimeoutExpired):
            continue
        if not _missing_dependencies(proc.stderr):
            if not terminal:
                sys.stdout.write(proc.stdout)
            sys.stderr.write(proc.stderr)
            sys.stdout.flush()
            return proc.returncode
    print("envcheck: every rank's records are in %s; this interpreter lacks envcheck's "
          "own dependencies, so build the report where envcheck is installed: "
          "envcheck report --records %s --json report.json (its exit code is the verdict)"
          % (records, records), file=sys.stderr)
    return None


def unjudged(merged, chunks):
    """No envcheck to judge a good run's outcomes against the matrix: a failed check may
    well be a known issue (envcheck run would exit 0), so exit 0 and say how many failed,
    rather than failing the job on outcomes nobody judged."""
    failed = _failed_checks(chunks)
    if failed:
        print("envcheck: %d check(s) failed, not yet judged against the matrix" % failed,
              file=sys.stderr)
    return RankExit.OK


def agent_line(args, identity, host, probes):
    """'envcheck: nodeB: ranks 2–3 of 4 ran 6 probes; rank 0 prints the report, writes
    report.json; every rank's records: /shared/out'."""
    rank, _, world_size, local_world_size = identity
    ranks = "rank %d" % rank if local_world_size == 1 else \
        "ranks %d–%d" % (rank, rank + local_world_size - 1)
    written = [p for p in (args.json_path, args.junit_path) if p]
    # The host name is anyone's (ENVCHECK_HOST, the hostname): shown escaped.
    return ("envcheck: %s: %s of %d ran %d probe%s; rank 0 prints the report%s; every "
            "rank's records: %s" % (printable(host), ranks, world_size, probes, "" if probes == 1 else "s",
                                    ", writes %s" % " and ".join(written) if written else "",
                                    os.path.abspath(args.out)))


def prefer_local(out, collected):
    """This host's ranks' own files where they hold more than the store got: a local
    rank's watcher writes its hang record and stacks here first, and its relay may not
    have sent them yet."""
    for name in os.listdir(out):
        if not name.startswith(("records-rank", "stacks-rank")):
            continue
        mine, theirs = os.path.join(out, name), os.path.join(collected, name)
        try:
            if not os.path.exists(theirs) or \
                    os.path.getsize(mine) > os.path.getsize(theirs):
                shutil.copyfile(mine, theirs)
        except OSError:
            continue


def _records_of(directory, rank):
    try:
        with open(records_path(directory, rank), encoding="utf-8", errors="replace") as f:
            return records_mod.parse(f.read())[0]
    except OSError:
        return []


def ranks_on_hosts(directory, ranks):
    """'rank(s) 2,3 on node2', from the host each rank's records name, else from the
    hosts rank 0 learnt in the launch probe (a rank may have sent nothing at all)."""
    mapping = next((x.get("data", {}).get("hosts") for x in _records_of(directory, 0)
                    if x.get("t") == "check" and x.get("probe") == "launch"
                    and x.get("check") == "rank_mapping"), None) or []
    by_host = {}
    for r in ranks:
        host = next((x["host"] for x in _records_of(directory, r) if x.get("host")), None)
        if host is None and 0 <= r < len(mapping) and isinstance(mapping[r], str):
            host = mapping[r]
        by_host.setdefault(host or "an unknown host", []).append(r)
    return "; ".join("rank(s) %s on %s" % (",".join(map(str, rs)), h)
                     for h, rs in by_host.items())

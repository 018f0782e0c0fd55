"""Every rank's records on rank 0's host, whatever happened: through the launcher's store.

In launcher mode the ranks of one job may share no filesystem. When the job ends well,
rank 0 gathers the records through the process group (``launched.gather_records``).
When it does not (a host's ranks failed at setup, a host died, a link went down, a rank
hung), the process group is no use, and the records are exactly what rank 0 needs.

So every rank also publishes its record stream, as it writes it, to the c10d store the
launcher already gives the job (``MASTER_ADDR:MASTER_PORT``: torchrun's agent store, or
under srun the store rank 0 hosts for ``init_process_group``). No rendezvous of
envcheck's own: the same TCPStore, under keys of its own (``envcheck/RUN/...``).

- ``Publisher`` (a thread in the rank): connects, then sends the new whole lines of the
  rank's record file every ``PERIOD_S``. Store calls release the GIL; a rank stuck in C++
  holding the GIL stops publishing, and its watcher (``watcher.py``) takes over.
- ``python -m envcheck.worker.relay`` (started by a rank's watcher once the rank has
  ended badly): publishes what the rank did not (the watcher's ``hang`` record, the
  stack dump), marks the rank done, and on rank 0 collects every rank's records into a
  directory that ``envcheck report --records DIR`` reads.

Keys, under ``envcheck/RUN/``: ``rec/R/n`` (chunks so far, by ``add``), ``rec/R/I`` (chunk
I), ``rec/R/bytes`` (bytes of the file published), ``stacks/R``, ``done/R``. Only ``set``,
``get``, ``add`` and ``check``: every torch release has them.
"""

import argparse
import datetime
import os
import sys
import threading
import time

from ..core.records import records_path, stacks_path

PERIOD_S = 0.2
CONNECT_S = 5.0  # a store that does not answer in this long is out of reach


def prefix(run_id):
    return "envcheck/%s/" % run_id


def connect(rank, world_size, timeout, host_store):
    """A client of the launcher's store (or, ``host_store``, rank 0's own server under
    srun: ``multi_tenant`` lets init_process_group's env:// reuse it in this process)."""
    import torch.distributed as dist

    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    kwargs = {"multi_tenant": True} if host_store else {}
    return dist.TCPStore(addr, port, world_size, host_store,
                         datetime.timedelta(seconds=timeout), wait_for_workers=False,
                         **kwargs)


def hosts_store(environ, rank):
    """Whether this rank hosts the store: rank 0 where no launcher agent does."""
    return rank == 0 and environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"


def _whole_lines(data):
    end = data.rfind(b"\n")
    return data[:end + 1] if end >= 0 else b""


def publish_file(store, keys, rank, path):
    """Send what of ``path`` is not in the store yet (whole lines only)."""
    sent = store.add(keys + "rec/%d/bytes" % rank, 0)
    try:
        with open(path, "rb") as f:
            f.seek(sent)
            data = _whole_lines(f.read())
    except OSError:
        return
    if data:
        index = store.add(keys + "rec/%d/n" % rank, 1)
        store.set(keys + "rec/%d/%d" % (rank, index), data)
        store.add(keys + "rec/%d/bytes" % rank, len(data))


class Publisher(threading.Thread):
    """Sends this rank's record file to the store as it grows (see the module doc)."""

    def __init__(self, run_id, rank, world_size, out_dir, host_store, connect_s):
        super().__init__(name="envcheck-relay", daemon=True)
        # As long as the rendezvous may wait: under srun the store is rank 0's, and
        # rank 0 may still be importing torch when this rank is ready.
        self.connect_s = max(CONNECT_S, connect_s)
        self.keys = prefix(run_id)
        self.rank, self.world_size, self.host_store = rank, world_size, host_store
        self.path = records_path(out_dir, rank)
        self._halt = threading.Event()

    def run(self):
        try:
            store = connect(self.rank, self.world_size, self.connect_s, self.host_store)
            # at once, then every PERIOD_S: a host that dies early has said it started
            publish_file(store, self.keys, self.rank, self.path)
            while not self._halt.wait(PERIOD_S):
                publish_file(store, self.keys, self.rank, self.path)
            publish_file(store, self.keys, self.rank, self.path)
        except Exception:
            return  # the watcher's relay says what could not be sent

    def flush(self, timeout=2.0):
        self._halt.set()
        self.join(timeout)


def _chunks(store, keys, rank):
    n_key = keys + "rec/%d/n" % rank
    if not store.check([n_key]):
        return b""
    n = store.add(n_key, 0)
    return b"".join(store.get(keys + "rec/%d/%d" % (rank, i)) for i in range(1, n + 1))


def collect(store, keys, world_size, into, deadline):
    """Every rank's published records and stacks, as per-rank files in ``into``; waits
    until each rank is done or ``deadline``. Returns the ranks that never said done."""
    ranks = range(world_size)
    while time.monotonic() < deadline:
        if store.check([keys + "done/%d" % r for r in ranks]):
            break
        time.sleep(0.1)
    silent = [r for r in ranks if not store.check([keys + "done/%d" % r])]
    os.makedirs(into, exist_ok=True)
    for r in ranks:
        data = _chunks(store, keys, r)
        if data:
            with open(records_path(into, r), "wb") as f:
                f.write(data)
        if store.check([keys + "stacks/%d" % r]):
            with open(stacks_path(into, r), "wb") as f:
                f.write(store.get(keys + "stacks/%d" % r))
    return silent


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m envcheck.worker.relay")
    p.add_argument("--out", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--collect", metavar="DIR", help="rank 0: every rank's files into DIR")
    p.add_argument("--wait", type=float, default=10.0,
                   help="how long rank 0 waits for the others to be done [%(default)s]")
    args = p.parse_args(argv)
    keys = prefix(args.run_id)
    deadline = time.monotonic() + args.wait
    try:
        store = connect(args.rank, args.world_size, CONNECT_S, False)
        publish_file(store, keys, args.rank, records_path(args.out, args.rank))
        try:
            with open(stacks_path(args.out, args.rank), "rb") as f:
                stacks = f.read()
        except OSError:
            stacks = b""
        if stacks.strip():
            store.set(keys + "stacks/%d" % args.rank, stacks)
        store.set(keys + "done/%d" % args.rank, b"1")
        if args.collect:
            silent = collect(store, keys, args.world_size, args.collect, deadline)
            print(",".join(map(str, silent)))
    except Exception as exc:
        sys.stderr.write("envcheck: the job's store at %s:%s is out of reach (%s: %s)\n" % (
            os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"),
            type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""))
        sys.exit(1)
    sys.exit(0)


if __name__ == "__main__":
    main()

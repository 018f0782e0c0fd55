"""Every rank's records on rank 0's host, whatever happened: through the launcher's store.

In launcher mode the ranks of one job may share no filesystem. When the job ends well,
rank 0 gathers the records through the process group (``launched.gather_records``).
When it does not (a host's ranks failed at setup, a host died, a link went down, a rank
hung), the process group is no use, and the records are exactly what rank 0 needs.

So the ranks also publish their record streams, as they write them, to the c10d store
the launcher already gives the job (``MASTER_ADDR:MASTER_PORT``: torchrun's agent store,
or under srun the store rank 0 hosts for ``init_process_group``). No rendezvous of
envcheck's own: the same TCPStore, under keys of its own (``envcheck/RUN/...``). That
store also serves torchrun's rendezvous and every rank's ``init_process_group``, so the
load envcheck puts on it grows with hosts, not ranks, and has a ceiling
(docs/scale.md has the measurements):

- ``Publisher`` (a thread in each host's local rank 0): connects, then sends the new
  whole lines of *every local rank's* record file as one compressed chunk, at once and
  then every ``period()``: ``PERIOD_S`` on a small job, longer once the job's hosts
  would write more than ``JOB_CHUNKS_PER_S`` chunks a second. A round with nothing new
  sends nothing. One ``set`` per host per round, whatever the ranks per host; what it
  sent is noted beside the records (``sent_path``) for the relay below. Store calls
  release the GIL; a rank stuck in C++ holding the GIL stops publishing, and each
  rank's watcher (``watcher.py``) sends that rank's last words.
- ``python -m envcheck.worker.relay`` (started by a rank's watcher once the rank has
  ended badly): sends, once, what of that rank's records the host's chunks do not hold
  yet (the watcher's ``hang`` record, the lines after the last chunk) with its stack
  dump, which also says the rank is done; on rank 0 it then collects every rank's
  records into a directory that ``envcheck report --records DIR`` reads.

Keys, under ``envcheck/RUN/``: ``hosts`` (hosts that published, by ``add``), ``host/I``
(host I's publishing rank), ``h/R/I`` (chunk I of the host whose local rank 0 is rank
R: pieces of record files, each "RANK INODE OFFSET LENGTH\\n" and that many bytes,
zlib-compressed), ``final/R`` (rank R's last words: pieces the same way, then its stack
dump; what does not fit in one value goes first, in ``final/R/I``). A chunk is written
under its number in one ``set``, never counted before it is there: a publisher killed
mid-send leaves no gap that a reader would wait on (the old ``add`` of a count, then the
chunk, did: rank 0's relay then waited on the missing chunk until the store's timeout
and reported the store out of reach). The reader puts each rank's file back together
by offset, so a piece sent twice is read once. Only ``set``, ``get``, ``add`` and
``check``: every torch release has them.
"""

import argparse
import datetime
import json
import os
import sys
import threading
import time
import zlib

from ..core.records import records_path, stacks_path

PERIOD_S = 0.2  # how often a host sends, on a small job
# The job's ceiling: chunks a second, all hosts together. At 0.2 s a host, reached at 100
# hosts; past that each host sends less often (1,000 hosts: every 2 s). Measured ceiling
# of one TCPStore and what this costs torchrun's rendezvous: docs/scale.md.
JOB_CHUNKS_PER_S = 500.0
CONNECT_S = 5.0  # a store that does not answer in this long is out of reach
# The most a chunk holds, before compression: torch's TCPStore (its libuv server, the
# default since 2.4) refuses a value over 8 MiB ("Invalid payload size") and drops the
# connection. More than this waits for the next round.
MAX_CHUNK = 1 << 20


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


def period(world_size, local_world_size):
    """How often a host sends: every ``PERIOD_S``, or less often, so that the job's
    hosts together send at most ``JOB_CHUNKS_PER_S`` chunks a second."""
    hosts = -(-world_size // max(1, local_world_size))
    return max(PERIOD_S, hosts / JOB_CHUNKS_PER_S)


def local_ranks(rank, local_rank, local_world_size, environ=os.environ):
    """The global ranks on this host: srun's SLURM_GTIDS where srun started the ranks
    (its distribution may be cyclic), else torchrun's contiguous block."""
    if environ.get("ENVCHECK_LAUNCHER") == "slurm" and environ.get("SLURM_GTIDS"):
        try:
            return sorted(int(r) for r in environ["SLURM_GTIDS"].split(","))
        except ValueError:
            pass
    first = rank - local_rank
    return list(range(first, first + max(1, local_world_size)))


def sent_path(out_dir, publisher):
    """What the host's publisher (global rank ``publisher``) has sent of each local
    rank's file: {rank: [inode, offset]}, beside the records."""
    return os.path.join(out_dir, ".relay-sent-rank%d.json" % publisher)


def _whole_lines(data):
    end = data.rfind(b"\n")
    return data[:end + 1] if end >= 0 else b""


def _new_lines(path, inode, offset):
    """(inode, offset, the whole lines after offset) of ``path`` now; a file made anew
    (another inode: a reused --out's stale file removed, then written again) starts at
    0. None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            ino = os.fstat(f.fileno()).st_ino
            start = offset if ino == inode else 0
            f.seek(start)
            return ino, start, _whole_lines(f.read())
    except OSError:
        return None


def _pieces(pieces):
    return b"".join(b"%d %d %d %d\n%s" % (r, ino, off, len(data), data)
                    for r, ino, off, data in pieces)


def frame(pieces, stacks=None):
    """Pieces (rank, inode, offset, bytes), and a final's stack dump, as one compressed
    value."""
    tail = b"stacks\n" + stacks if stacks is not None else b""
    return zlib.compress(_pieces(pieces) + tail, 1)


def unframe(value):
    """A value's pieces, and its stack dump (b"" where it has none)."""
    data = zlib.decompress(value)
    pieces, i = [], 0
    while i < len(data):
        nl = data.find(b"\n", i)
        head = data[i:nl].split() if nl >= 0 else []
        if len(head) != 4 or not all(h.isdigit() for h in head):
            break
        r, ino, off, n = map(int, head)
        pieces.append((r, ino, off, data[nl + 1:nl + 1 + n]))
        i = nl + 1 + n
    rest = data[i:]
    return pieces, rest[len(b"stacks\n"):] if rest.startswith(b"stacks\n") else b""


class HostStream:
    """One host's records, sent as chunks: what each local rank's file holds that the
    store does not."""

    def __init__(self, keys, out_dir, ranks, publisher):
        self.keys = keys
        self.out = out_dir
        self.ranks = ranks
        self.publisher = publisher
        self.sent = {r: (None, 0) for r in ranks}
        self.index = 0  # chunks this host has sent

    def send(self, store):
        """One round: a chunk of the new whole lines (``MAX_CHUNK`` at most), or
        nothing. Returns the chunk's size."""
        pieces, room = [], MAX_CHUNK
        for r in self.ranks:
            found = _new_lines(records_path(self.out, r), *self.sent[r])
            if found and found[2] and room > 0:
                pieces.append((r, found[0], found[1], found[2][:room]))
                room -= len(pieces[-1][3])
        if not pieces:
            return 0
        if self.index == 0:  # this host's first chunk: say where the host's chunks are
            store.set(self.keys + "host/%d" % store.add(self.keys + "hosts", 1),
                      str(self.publisher))
        chunk = frame(pieces)
        store.set(self.keys + "h/%d/%d" % (self.publisher, self.index + 1), chunk)
        self.index += 1
        for r, ino, off, data in pieces:
            self.sent[r] = (ino, off + len(data))
        _write_sent(sent_path(self.out, self.publisher), self.sent)
        return len(chunk)


def _write_sent(path, sent):
    """Whole or not at all (a rename), no fsync: only this host's relay reads it."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "w") as f:
            json.dump({str(r): [ino, off] for r, (ino, off) in sent.items()}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # the relay then sends the whole file: more bytes, same records


def _read_sent(path, rank):
    try:
        with open(path) as f:
            ino, off = json.load(f)[str(rank)]
        return int(ino), int(off)
    except (OSError, ValueError, KeyError, TypeError):
        return None, 0


class Publisher(threading.Thread):
    """Sends this host's record files to the store as they grow (see the module doc).
    ``local``: (local rank, local world size) of this rank; only local rank 0 sends."""

    def __init__(self, run_id, rank, world_size, out_dir, host_store, connect_s,
                 local=(0, 1), environ=os.environ):
        super().__init__(name="envcheck-relay", daemon=True)
        # As long as the rendezvous may wait: under srun the store is rank 0's, and
        # rank 0 may still be importing torch when this rank is ready.
        self.connect_s = max(CONNECT_S, connect_s)
        self.rank, self.world_size, self.host_store = rank, world_size, host_store
        self.period = period(world_size, local[1])
        self.stream = HostStream(prefix(run_id), out_dir,
                                 local_ranks(rank, local[0], local[1], environ), rank)
        self._halt = threading.Event()

    def run(self):
        try:
            store = connect(self.rank, self.world_size, self.connect_s, self.host_store)
            # at once, then every period: a host that dies early has said it started
            self.stream.send(store)
            while not self._halt.wait(self.period):
                self.stream.send(store)
            for _ in range(64):  # the last lines, a chunk a call
                if not self.stream.send(store):
                    break
        except Exception:
            return  # each rank's watcher's relay says what could not be sent

    def flush(self, timeout=2.0):
        self._halt.set()
        self.join(timeout)


def last_words(out_dir, rank, local_rank, local_world_size, environ=os.environ):
    """Rank ``rank``'s final values: the lines of its file its host's chunks lack (from
    what its host's publisher noted), ``MAX_CHUNK`` a value, the last one with its
    stack dump (its last ``MAX_CHUNK`` bytes)."""
    publisher = local_ranks(rank, local_rank, local_world_size, environ)[0]
    inode, offset = _read_sent(sent_path(out_dir, publisher), rank)
    ino, start, data = _new_lines(records_path(out_dir, rank), inode, offset) or (0, 0, b"")
    pieces = [(rank, ino, start + i, data[i:i + MAX_CHUNK])
              for i in range(0, len(data), MAX_CHUNK)] or [None]
    try:
        with open(stacks_path(out_dir, rank), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - MAX_CHUNK))
            stacks = f.read()
    except OSError:
        stacks = b""
    values = [frame([p]) for p in pieces[:-1]]
    values.append(frame([pieces[-1]] if pieces[-1] else [], stacks if stacks.strip() else b""))
    return values


def _get(store, key):
    """The value of ``key``, or None: never a wait on a key nobody will write."""
    return store.get(key) if store.check([key]) else None


def _assemble(pieces):
    """Each rank's file, from its pieces in the order they were sent: the inode sent
    last, its bytes from 0 on as far as they run without a gap."""
    by_rank = {}
    for r, ino, off, data in pieces:
        by_rank.setdefault(r, []).append((ino, off, data))
    files = {}
    for r, got in by_rank.items():
        inode = got[-1][0]
        out, at = [], 0
        for _, off, data in sorted((p for p in got if p[0] == inode), key=lambda p: p[1]):
            if off > at:
                break  # a gap: what follows it cannot be placed
            if off + len(data) > at:
                out.append(data[at - off:])
                at = off + len(data)
        files[r] = b"".join(out)
    return files


def collect(store, keys, world_size, into, deadline):
    """Every rank's published records and stacks, as per-rank files in ``into``; waits
    until each rank sent its last words or ``deadline``. Returns the ranks that never
    did."""
    ranks = range(world_size)
    while time.monotonic() < deadline:
        if store.check([keys + "final/%d" % r for r in ranks]):
            break
        time.sleep(0.1)
    pieces, stacks, silent = [], {}, []
    for i in range(1, store.add(keys + "hosts", 0) + 1):
        publisher = _get(store, keys + "host/%d" % i)
        n = 0
        while publisher is not None:
            chunk = _get(store, keys + "h/%s/%d" % (publisher.decode(), n + 1))
            if chunk is None:
                break
            pieces += unframe(chunk)[0]
            n += 1
    for r in ranks:
        final = _get(store, keys + "final/%d" % r)
        if final is None:
            silent.append(r)
            continue
        part = 1
        while True:
            before = _get(store, keys + "final/%d/%d" % (r, part))
            if before is None:
                break
            pieces += unframe(before)[0]
            part += 1
        got, stacks[r] = unframe(final)
        pieces += got
    os.makedirs(into, exist_ok=True)
    for r, data in sorted(_assemble(pieces).items()):
        if data and 0 <= r < world_size:
            with open(records_path(into, r), "wb") as f:
                f.write(data)
    for r, dump in stacks.items():
        if dump.strip():
            with open(stacks_path(into, r), "wb") as f:
                f.write(dump)
    return silent


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m envcheck.worker.relay")
    p.add_argument("--out", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--local-rank", type=int, default=0)
    p.add_argument("--local-world-size", type=int, default=1)
    p.add_argument("--collect", metavar="DIR", help="rank 0: every rank's files into DIR")
    p.add_argument("--wait", type=float, default=10.0,
                   help="how long rank 0 waits for the others to be done [%(default)s]")
    args = p.parse_args(argv)
    keys = prefix(args.run_id)
    try:
        store = connect(args.rank, args.world_size, CONNECT_S, False)
        # from here: the others' whole wait, not what this process's import of torch
        # and its connect took of it
        deadline = time.monotonic() + args.wait
        values = last_words(args.out, args.rank, args.local_rank, args.local_world_size)
        for i, value in enumerate(values[:-1]):
            store.set(keys + "final/%d/%d" % (args.rank, i + 1), value)
        store.set(keys + "final/%d" % args.rank, values[-1])  # last: the rank is done
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

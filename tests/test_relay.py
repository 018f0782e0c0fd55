"""The relay: every rank's records reach rank 0 through a real TCPStore, whatever happened.

Real stores (torch.distributed.TCPStore, as torchrun's agent hosts it), real publisher
threads and processes, real SIGKILLs. The launcher-mode jobs around it are in
test_launcher.py and the cluster tests.
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from envcheck.core.records import RecordWriter, records_path, stacks_path
from envcheck.run.supervisor import free_port
from envcheck.worker import relay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def store(monkeypatch):
    import torch.distributed as dist

    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, 1, True, datetime.timedelta(seconds=10),
                           wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    yield server


def _relay(*args):
    with pytest.raises(SystemExit) as ended:
        relay.main([str(a) for a in args])
    return ended.value.code


# A rank writes LINES records of 1 MB each (random: they do not compress), then starts
# its publisher, which sends them as soon as it connects; the test kills the rank while
# they are on their way.
SENDER = '''
import base64, os, sys, time
sys.path.insert(0, %(root)r)
from envcheck.core.records import RecordWriter, records_path
from envcheck.worker import relay
out, run_id, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
w = RecordWriter(records_path(out, 1), 1)
for i in range(lines):
    w.write("check", probe="big", check="c%%d" %% i,
            detail=base64.b64encode(os.urandom(3 << 18)).decode())
relay.Publisher(run_id, 1, 2, out, False, 5.0).start()
print("sending", flush=True)
time.sleep(60)
'''


def _killed_while_sending(store, tmp_path, run_id, lines, keys=None, seconds=0.0):
    """Rank 1 killed as soon as the store holds ``keys`` more keys, else ``seconds`` into
    sending; its watcher's relay, then rank 0's: rank 1's file as rank 0 got it, and its
    own."""
    out = tmp_path / "out"
    out.mkdir()
    before = store.num_keys()
    sender = subprocess.Popen([sys.executable, "-c", SENDER % {"root": ROOT},
                               str(out), run_id, str(lines)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert sender.stdout.readline() == "sending\n"
        deadline = time.monotonic() + 10
        while keys and store.num_keys() < before + keys and time.monotonic() < deadline:
            pass  # as close behind the sender as this process can follow it
        # the kill falls where it was asked to: after the store got that many keys
        assert not keys or store.num_keys() >= before + keys, store.num_keys() - before
        time.sleep(seconds)
    finally:
        sender.send_signal(signal.SIGKILL)
        sender.wait()
    w = RecordWriter(records_path(str(out), 0), 0)
    w.write("hello", host="node1")
    w.close()
    assert _relay("--out", out, "--run-id", run_id, "--rank", 1, "--world-size", 2) == 0
    t0 = time.monotonic()
    assert _relay("--out", out, "--run-id", run_id, "--rank", 0, "--world-size", 2,
                  "--collect", tmp_path / "got", "--wait", 5) == 0
    assert time.monotonic() - t0 < 5  # every rank had said done: no wait at all
    for rank in (0, 1):
        with open(records_path(str(out), rank), "rb") as a, \
                open(records_path(str(tmp_path / "got"), rank), "rb") as b:
            assert a.read() == b.read(), rank


# 6 records of 1 MB: the publisher's first round sends them as 3 keys (the host, its
# first chunk and the count of hosts), so (3, 0) kills the rank as soon as they are all there
@pytest.mark.parametrize("keys,seconds", [(1, 0), (2, 0), (3, 0), (None, 0.3)])
def test_a_rank_killed_while_its_records_are_on_their_way_reaches_rank_0_whole(
        store, tmp_path, keys, seconds):
    """The CI flake (test_k8s_manifests: 'no records from rank(s) 1'): a rank ended
    (os._exit after a failed setup) while its records were on their way to the store.
    Rank 0 must get that rank's file exactly: no line lost, none twice, and no wait on
    a chunk that never came."""
    _killed_while_sending(store, tmp_path, "k%s" % keys, 6, keys, seconds)


def test_a_rank_whose_records_grow_by_20_mb_at_once_reaches_rank_0_whole(store, tmp_path):
    """The store refuses a value over 8 MiB: a file that grew past that between two
    rounds is sent in chunks, and so are its last words."""
    _killed_while_sending(store, tmp_path, "big", 20, seconds=0.3)


def _ranks_writing(out, ranks, lines):
    writers = {r: RecordWriter(records_path(out, r), r) for r in ranks}
    for i in range(lines):
        for w in writers.values():
            w.write("check", probe="p", check="c%d" % i, outcome="passed", detail="d" * 200)
    return writers


def test_one_host_of_eight_ranks_writes_one_chunk_a_round_whatever_its_ranks_write(
        store, tmp_path):
    """The store's load grows with hosts, not ranks: one publisher per host sends every
    local rank's new lines as one chunk a round; a round with nothing new sends nothing."""
    out = str(tmp_path)
    writers = _ranks_writing(out, range(8, 16), 50)
    keys = relay.prefix("agg")
    pub = relay.Publisher("agg", 8, 32, out, False, 5.0, local=(0, 8))
    assert pub.period == relay.PERIOD_S
    pub.start()
    time.sleep(1.0)  # about 5 rounds, with nothing new after the first
    for w in writers.values():
        w.write("bye")
    pub.flush()
    # this host: its first chunk, its last one, and where they are
    assert store.add(keys + "hosts", 0) == 1
    assert store.get(keys + "host/1") == b"8"
    assert store.check([keys + "h/8/1", keys + "h/8/2"])
    assert not store.check([keys + "h/8/3"])
    for r in range(8, 16):
        _relay("--out", out, "--run-id", "agg", "--rank", r, "--world-size", 32,
               "--local-rank", r - 8, "--local-world-size", 8)
        # each rank's last words hold nothing the chunks already had
        assert not store.check([keys + "final/%d/1" % r])
        pieces, stacks = relay.unframe(store.get(keys + "final/%d" % r))
        assert (pieces, stacks) == ([], b"")
    silent = relay.collect(store, keys, 32, str(tmp_path / "got"), time.monotonic())
    assert silent == list(range(8)) + list(range(16, 32))
    for r in range(8, 16):
        with open(records_path(out, r), "rb") as a, \
                open(records_path(str(tmp_path / "got"), r), "rb") as b:
            assert a.read() == b.read(), r


def test_a_ranks_last_words_are_what_its_host_had_not_sent_and_its_stacks(store, tmp_path):
    """A rank that hung: its watcher adds the hang record and the stack dump after the
    host's last chunk; they reach rank 0 once, after what the chunks held."""
    out = str(tmp_path)
    writers = _ranks_writing(out, (2, 3), 3)
    pub = relay.Publisher("hang", 2, 4, out, False, 5.0, local=(0, 2))
    pub.start()
    pub.flush()
    writers[3].write("hang", phase="probe:p", waited_s=12.0)
    with open(stacks_path(out, 3), "w") as f:
        f.write("Thread 0x1 (most recent call first):\n  File \"p.py\", line 3\n")
    assert _relay("--out", out, "--run-id", "hang", "--rank", 3, "--world-size", 4,
                  "--local-rank", 1, "--local-world-size", 2) == 0
    pieces, stacks = relay.unframe(store.get(relay.prefix("hang") + "final/3"))
    assert [json.loads(line)["t"] for _, _, _, data in pieces
            for line in data.splitlines()] == ["hang"]
    assert stacks.startswith(b"Thread 0x1")
    silent = relay.collect(store, relay.prefix("hang"), 4, str(tmp_path / "got"),
                           time.monotonic())
    assert silent == [0, 1, 2]
    with open(records_path(out, 3), "rb") as a, \
            open(records_path(str(tmp_path / "got"), 3), "rb") as b:
        assert a.read() == b.read()
    with open(stacks_path(str(tmp_path / "got"), 3)) as f:
        assert f.read().startswith("Thread 0x1")


def test_a_stale_file_of_a_previous_job_is_replaced_by_the_new_one(store, tmp_path):
    """A reused --out: the host's publisher sent a previous job's file before the rank's
    watcher removed it; rank 0 gets the new file only."""
    out = str(tmp_path)
    _ranks_writing(out, (0, 1), 5)
    stream = relay.HostStream(relay.prefix("stale"), out, [0, 1], 0)
    assert stream.send(store) > 0
    os.remove(records_path(out, 1))
    _ranks_writing(out, (1,), 2)
    assert stream.send(store) > 0
    relay.collect(store, relay.prefix("stale"), 2, str(tmp_path / "got"), time.monotonic())
    for r in (0, 1):
        with open(records_path(out, r), "rb") as a, \
                open(records_path(str(tmp_path / "got"), r), "rb") as b:
            assert a.read() == b.read(), r


@pytest.mark.parametrize("hosts,expected", [(2, 0.2), (100, 0.2), (1000, 2.0),
                                            (10000, 20.0)])
def test_a_host_sends_less_often_as_the_job_grows(hosts, expected):
    assert relay.period(hosts * 8, 8) == pytest.approx(expected)


def test_the_hosts_ranks_under_srun_come_from_slurm_gtids():
    env = {"ENVCHECK_LAUNCHER": "slurm", "SLURM_GTIDS": "1,5,9"}
    assert relay.local_ranks(5, 1, 3, env) == [1, 5, 9]
    assert relay.local_ranks(5, 1, 3, {}) == [4, 5, 6]


# --- what the store carries while the pre-checks wait for a late host ---

AGREE = '''
import sys, time
sys.path.insert(0, %(root)r)
from envcheck.worker import rendezvous
rank, late = int(sys.argv[1]), float(sys.argv[2])
time.sleep(late)
t0 = time.monotonic()
print(rendezvous._agree({"timeout": 30.0}, (rank, 0, 2, 1), None),
      round(time.monotonic() - t0, 1), flush=True)
'''


def test_ranks_waiting_for_a_late_hosts_pre_checks_cost_the_store_a_few_calls(
        store, tmp_path):
    """Every rank posts its pre-checks and waits for the others' verdict. Rank 0 waiting
    3 s for rank 1 (its host late) makes a handful of store calls, not one every 20 ms
    (at 8,000 ranks those were 800,000 calls a second, while init_process_group needs
    the same store)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "bench", "store_trace"),
                                                       ROOT]),
               ENVCHECK_STORE_TRACE=str(tmp_path / "trace"), TORCHELASTIC_RUN_ID="late",
               TORCHELASTIC_USE_AGENT_STORE="True")
    ranks = [subprocess.Popen([sys.executable, "-c", AGREE % {"root": ROOT}, str(rank),
                               str(late)], env=env, stdout=subprocess.PIPE, text=True)
             for rank, late in ((0, 0.0), (1, 3.0))]
    said = [r.communicate(timeout=60)[0].split() for r in ranks]
    assert said[0][0] == "None" and float(said[0][1]) >= 2.0, said  # it waited, then went on
    assert said[1][0] == "None", said
    calls = {}
    for path in (tmp_path / "trace").iterdir():
        with open(path) as f:
            for line in f:
                call = json.loads(line)
                calls.setdefault(call["pid"], []).append(call["op"])
    assert sorted(calls[ranks[0].pid]) == ["add", "check", "set", "wait"], calls

"""A hung rank's stack dump is read whole: it has come to the rank's main thread.

faulthandler writes every thread, the main thread last, from a signal handler. A rank
descheduled mid-dump on a loaded node stops writing for a while; twice a CI run's hung
report lost its waiting ranks' places to a dump read before its main thread was in it.
These use real dumps, written by faulthandler in a process of their own.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

from envcheck.core import blame

# A process with two helper threads, its main thread waiting in waiting_here(): it
# registers its dump for SIGUSR1, says its main thread's ident, and waits.
DUMPER = textwrap.dedent('''
    import faulthandler, signal, sys, threading, time
    faulthandler.register(signal.SIGUSR1, file=open(sys.argv[1], "w"), all_threads=True)
    for _ in range(2):
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    def waiting_here():
        print(threading.get_ident(), flush=True)
        time.sleep(60)
    waiting_here()
''')

# Writes a dump in two parts, as a rank descheduled mid-dump does: the helper threads,
# then, after a pause longer than the steady time, the main thread.
SLOW_WRITER = textwrap.dedent('''
    import sys, time
    text, cut = open(sys.argv[1]).read(), int(sys.argv[3])
    with open(sys.argv[2], "w") as f:
        f.write(text[:cut]); f.flush()
        time.sleep(float(sys.argv[4]))
        f.write(text[cut:])
''')


def _real_dump(tmp_path):
    """(a real faulthandler dump of DUMPER, its main thread's ident)."""
    path = tmp_path / "stacks.txt"
    proc = subprocess.Popen([sys.executable, "-c", DUMPER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        thread = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGUSR1)
        got = blame.await_dumps({0: (str(path), 0)}, {0: thread})[0]
    finally:
        proc.kill()
        proc.wait()
    return got, thread


def test_a_real_dump_is_whole_once_it_shows_the_main_thread(tmp_path):
    dump, thread = _real_dump(tmp_path)
    assert dump.count("Thread 0x") + dump.count("Current thread 0x") == 3, dump
    assert blame.whereabouts(dump)["at"].endswith(" waiting_here"), dump
    assert blame.reached_main_thread(dump, thread)
    main = dump.index("0x%016x" % thread)
    cut_before = dump[:dump.rindex("\n", 0, main) + 1]
    assert not blame.reached_main_thread(cut_before, thread)  # the helpers' only
    header_only = dump[:dump.index("\n", main) + 1]
    assert not blame.reached_main_thread(header_only, thread)  # no frame yet
    assert not blame.reached_main_thread(dump, thread + 1)  # another process's thread


def test_a_dump_paused_before_its_main_thread_is_waited_for(tmp_path):
    dump, thread = _real_dump(tmp_path)
    (tmp_path / "whole.txt").write_text(dump)
    main = dump.index("0x%016x" % thread)
    cut = dump.rindex("\n", 0, main) + 1  # the helper threads, then a pause
    out = tmp_path / "paused.txt"
    writer = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(tmp_path / "whole.txt"),
                               str(out), str(cut), str(4 * blame.DUMP_STEADY_S)])
    try:
        while not (out.exists() and out.stat().st_size):
            time.sleep(0.01)
        got = blame.await_dumps({3: (str(out), 0)}, {3: thread})[3]
    finally:
        writer.wait()
    assert got == dump
    assert blame.whereabouts(got)["at"].endswith(" waiting_here")


def test_a_dump_is_read_from_its_offset_and_a_rank_that_never_dumps_is_not_waited_on_forever(
        tmp_path):
    # The watcher asks the same rank again later: the new dump starts at the old size.
    dump, thread = _real_dump(tmp_path)
    path = tmp_path / "two.txt"
    path.write_text("an earlier dump\n" + dump)
    assert blame.await_dumps({0: (str(path), 16)}, {0: thread})[0] == dump
    silent = tmp_path / "silent.txt"
    silent.write_text("")
    t0 = time.monotonic()
    assert blame.await_dumps({1: (str(silent), 0)}, {1: thread}, wait_s=0.5) == {1: ""}
    assert time.monotonic() - t0 >= 0.5

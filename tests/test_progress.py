"""The live view's line, from the records ranks write (the supervisor feeds them)."""

import io
import types

from envcheck.run.progress import Progress

PLAN = types.SimpleNamespace(nproc=2, timeout=60.0, startup_timeout=120.0,
                             probes=[types.SimpleNamespace(name="launch"),
                                     types.SimpleNamespace(name="collectives")])


def feed(progress, *records):
    for rank, kind, fields in records:
        progress(dict(fields, t=kind, rank=rank))


def test_the_line_follows_the_ranks_through_their_phases():
    p = Progress(stream=io.StringIO(), plan=PLAN)
    assert p.status(now=p.started + 1.25) == \
        "starting ranks · 1.2 s of 120 s · 0/2 ranks imported torch"
    feed(p, (1, "hello", {}))
    assert p.status(now=p.started + 3.0).endswith("· 1/2 ranks imported torch")
    feed(p, (0, "hello", {}), (0, "setup_start", {}), (1, "setup_start", {}),
         (0, "setup", {"outcome": "passed"}))
    since = p.trackers[1].started  # rank 1 has been in setup longest
    assert p.status(now=since + 0.5) == \
        "init_process_group · 0.5 s of 60 s · 1/2 ranks in the group"
    feed(p, (1, "setup", {"outcome": "passed"}), (0, "probe_start", {"probe": "collectives"}),
         (1, "probe_start", {"probe": "collectives"}),
         (0, "check_start", {"probe": "collectives", "check": "all_reduce"}))
    since = min(t.started for t in p.trackers.values())
    assert p.status(now=since + 2.0) == \
        "probe collectives 2/2 · all_reduce · 2.0 s of 60 s · 2/2 ranks in the group"
    assert p.status(now=since + 61.0) == (
        "probe collectives 2/2 · all_reduce · 61.0 s of 60 s: a hang; collecting stacks, "
        "restarting · 2/2 ranks in the group")


def test_not_a_terminal_gets_todays_plain_lines_and_quiet_nothing():
    out = io.StringIO()
    p = Progress(stream=out, plan=PLAN)
    feed(p, (0, "hello", {"torch_import_s": 2.5}), (1, "hello", {}),
         (0, "setup_start", {"backend": "gloo"}), (0, "probe_start", {"probe": "launch"}),
         (0, "check_start", {"probe": "launch", "check": "env"}))
    assert out.getvalue() == ("envcheck: torch imported in 2.50 s\n"
                              "envcheck: init_process_group (gloo)\n"
                              "envcheck: probe launch\n")
    quiet = io.StringIO()
    feed(Progress(stream=quiet, enabled=False, plan=PLAN), (0, "hello", {}))
    assert quiet.getvalue() == ""

"""The live view's line, from the records ranks write (the supervisor feeds them)."""

import io
import types

from envcheck.render.progress import Progress

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


def test_a_follow_up_phase_counts_its_own_ranks_and_names_its_check():
    p = Progress(stream=io.StringIO(), plan=PLAN)
    feed(p, (0, "hello", {}), (1, "hello", {}), (0, "setup", {"outcome": "passed"}),
         (1, "setup", {"outcome": "passed"}), (0, "probe_start", {"probe": "fsdp"}))
    # after the main run, fresh ranks at 3 for one check (run/follow_up.py says so)
    p({"t": "phase", "probe": "fsdp", "check": "reshard_load", "world_size": 3})
    feed(p, *[(r, "hello", {}) for r in range(3)])
    feed(p, *[(r, "setup", {"outcome": "passed"}) for r in range(3)])
    feed(p, (0, "probe_start", {"probe": "fsdp"}),
         (0, "check_start", {"probe": "fsdp", "check": "reshard_load"}))
    since = min(t.started for t in p.trackers.values())
    assert p.status(now=since + 1.0) == ("probe fsdp.reshard_load at 3 ranks · reshard_load "
                                         "· 1.0 s of 60 s · 3/3 ranks in the group")


def test_each_phase_leaves_its_own_line_not_the_probes_again():
    import os

    out = io.StringIO()
    out.isatty = lambda: True
    env = dict(os.environ)
    os.environ.pop("TERM", None)
    try:
        p = Progress(stream=out, plan=PLAN, no_color=True)
    finally:
        os.environ.clear()
        os.environ.update(env)
    with p:
        for phase in (None, ("reshard_load", 3), ("reshard_load_1", 1)):
            if phase:
                p({"t": "phase", "probe": "fsdp", "check": phase[0], "world_size": phase[1]})
            n = phase[1] if phase else 2
            feed(p, *[(r, "hello", {}) for r in range(n)])
            feed(p, *[(r, "setup", {"outcome": "passed"}) for r in range(n)])
            feed(p, *[(r, "probe_start", {"probe": "fsdp"}) for r in range(n)])
            feed(p, *[(r, "check", {"probe": "fsdp", "check": phase[0] if phase else "step",
                                    "outcome": "passed"}) for r in range(n)])
            feed(p, *[(r, "probe_end", {"probe": "fsdp", "seconds": 0.5}) for r in range(n)])
    # the lines the view shows above its live line, a probe's or a phase's each, once
    left = [text.plain for text in p._left]
    names = [line.split()[1] for line in left]
    assert names == ["fsdp", "fsdp.reshard_load", "fsdp.reshard_load_1"], left
    assert left[1].endswith("1 passed at 3 ranks  0.50 s")

"""Where the time of an attempt went, per rank and per phase, read from the records.

Every record carries the rank's wall clock (``time``); the supervisor notes when it
started the attempt's ranks. A rank's phases, in order (a phase a rank never reached is
absent):

- ``start``: from the supervisor starting the rank (or, under a launcher, the rank's
  first record) to its ``hello``: Python starting and ``import torch`` (whose own share is
  ``import_torch_s``; ``forked``: the rank was forked by the attempt's zygote, which
  imported torch once for every rank, see ``run/spawn.py``);
- ``environment``: ``hello`` to ``setup_start`` (rank 0 collects the environment);
- ``rendezvous``: ``init_process_group``, waiting for every rank included;
- ``probe:NAME``: one per probe;
- ``teardown``: the final barrier, to ``bye``.

Times are seconds from the attempt's start (``started``, Unix time), rounded to the
millisecond; what runs in parallel across ranks shows as overlapping intervals.
"""

PAIRS = (("hello", "setup_start", "environment"), ("setup_start", "setup", "rendezvous"),
         ("teardown_start", "bye", "teardown"))


def _phases(records, started):
    """The phases of one rank, in the order its records began them."""
    out = []  # (index of the record that began the phase, phase)
    first = {}
    for i, rec in enumerate(records):
        first.setdefault(rec["t"], (i, rec))
    if "hello" in first:
        hello = first["hello"][1]
        out.append((-1, {"phase": "start", "start_s": 0.0,
                         "seconds": round(hello["time"] - started, 3),
                         "import_torch_s": hello.get("torch_import_s"),
                         "forked": hello.get("zygote_pid") is not None}))
    for begin, end, name in PAIRS:
        if begin in first and end in first:
            i, b = first[begin]
            out.append((i, {"phase": name, "start_s": round(b["time"] - started, 3),
                            "seconds": round(first[end][1]["time"] - b["time"], 3)}))
    opened = {}
    for i, rec in enumerate(records):
        if rec["t"] == "probe_start":
            opened[rec["probe"]] = (i, rec["time"])
        elif rec["t"] == "probe_end" and rec.get("probe") in opened:
            j, t0 = opened.pop(rec["probe"])
            out.append((j, {"phase": "probe:" + rec["probe"],
                            "start_s": round(t0 - started, 3),
                            "seconds": round(rec["time"] - t0, 3)}))
    for probe, (j, t0) in opened.items():  # the probe an abort ended
        out.append((j, {"phase": "probe:" + probe, "start_s": round(t0 - started, 3),
                        "seconds": None}))
    return [phase for _, phase in sorted(out, key=lambda item: item[0])]


def of_attempt(attempt):
    """{"started": Unix time, "ranks": {"0": [phase, ...], ...}} for the report."""
    started = attempt.started
    if started is None:  # launcher mode: the earliest record of any rank
        times = [r["time"] for recs in attempt.records.values() for r in recs if "time" in r]
        started = min(times) if times else None
    if started is None:
        return None
    out = {"started": round(started, 3)}
    if attempt.prepared is not None:  # its zygote began importing torch before it started
        out["prepared"] = round(attempt.prepared, 3)
    out["ranks"] = {str(rank): _phases([r for r in recs if "time" in r], started)
                    for rank, recs in sorted(attempt.records.items())}
    return out

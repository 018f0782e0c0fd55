"""A Summary as one screen of text, and as versioned JSON."""

import json

from .. import __version__
from ..core.text import wrap
from ..summary import hostlist
from ..summary.inputs import FAILS

SUMMARY_SCHEMA_VERSION = 1
LABEL = {"driver": "driver", "gpu_model": "GPU", "gpu_count": "GPU count",
         "python": "Python", "glibc": "glibc", "asked": "answer for"}


def _count(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def _nodes(n):
    return _count(n, "node")


def _wrap(text, width, indent="    "):
    return wrap(text, width, subsequent_indent=indent) or [text]


MAX_GROUPS = 8  # failure groups shown; the rest are counted (JSON lists them all)
MAX_VALUES = 3  # outlier values shown per fact; the rest are counted


def render(summary, width=80, verbose=False):
    """The screen; ``verbose`` (-v): every group and value, none counted away."""
    groups_shown, values_shown = (None, None) if verbose else (MAX_GROUPS, MAX_VALUES)
    total = len(summary.records)
    checks = sum("check" in r.kind.split("+") for r in summary.records)
    runs = sum("run" in r.kind.split("+") for r in summary.records)
    what = [_count(n, word) for n, word in ((checks, "check answer"), (runs, "run report"))
            if n]
    out = ["%s: %s" % (_nodes(total), " and ".join(what) if what
                       else "no answer could be read")]
    asked = sorted({r.facts.get("asked") for r in summary.records})
    if len(asked) == 1:
        out.append("asked: %s" % asked[0])
    out += _build_lines(summary, width, values_shown)
    if total:
        out.append("✓ %d of %s will work" % (len(summary.working), _nodes(total)))
    for g in summary.groups[:groups_shown]:
        verb = "will not work" if g.status == FAILS else "cannot be judged"
        glyph = "✗" if g.status == FAILS else "?"
        out += _wrap("%s %s %s: %s: %s" % (glyph, _nodes(len(g.hosts)), verb,
                                           "; ".join(g.reasons), hostlist.listing(g.hosts)),
                     width)
    rest = summary.groups[groups_shown:] if groups_shown else []
    if rest:
        out += _wrap("… %s more will not work or cannot be judged, for %d other reasons: "
                     "%s (-v or --format json lists them)"
                     % (_nodes(sum(len(g.hosts) for g in rest)), len(rest),
                        hostlist.compress([h for g in rest for h in g.hosts])), width)
    # the builds pip gives are said above, with why: not again as outliers
    outliers = [o for o in summary.outliers if not (summary.builds and o.fact == "asked")]
    if outliers:
        out += ["", "Differ from the majority:"]
    for fact in dict.fromkeys(o.fact for o in outliers):
        values = [o for o in outliers if o.fact == fact]
        if values[0].majority is None:
            out += _wrap("  %s: no majority, %d values on %s" % (
                LABEL[fact], len(values), _nodes(sum(len(o.hosts) for o in values))),
                width, "      ")
            continue
        for o in values[:values_shown]:
            out += _wrap("  %s %s on %s (%d have %s)" % (
                LABEL[fact], o.value, hostlist.listing(o.hosts), o.majority_count,
                o.majority), width, "      ")
        more = values[values_shown:] if values_shown else []
        if more:
            out += _wrap("  %s: %s more on %s" % (
                LABEL[fact], _count(len(more), "other value"),
                hostlist.compress([h for o in more for h in o.hosts])), width, "      ")
    if summary.problems:
        out += ["", "Could not use:"]
        for p in summary.problems:
            out += _wrap("  %s: %s" % (p.path, p.error), width, "      ")
    if summary.notes:
        out += ["", "Used, with a note:"]
        for p in summary.notes:
            out += _wrap("  %s: %s" % (p.path, p.error), width, "      ")
    return "\n".join(out) + "\n"


def _build_lines(summary, width, shown=MAX_VALUES):
    """asked: torch>=2.4, as pip resolves it per node: the build each group gets."""
    if not summary.builds:
        return []
    total = sum(len(g.hosts) for g in summary.builds)
    out = ["asked: %s; pip gives:" % summary.records[0].facts.get("requirement")]
    for g in summary.builds[:shown]:
        why = " (newer: %s)" % g.held_back if g.held_back else ""
        hosts = "" if len(g.hosts) * 2 > total else ": %s" % hostlist.listing(g.hosts)
        out += _wrap("  %s get %s%s%s" % (_nodes(len(g.hosts)), g.build, why, hosts),
                     width, "      ")
    rest = summary.builds[shown:] if shown else []
    if rest:
        out += _wrap("  … %s get %d other builds: %s" % (
            _nodes(sum(len(g.hosts) for g in rest)), len(rest),
            hostlist.compress([h for g in rest for h in g.hosts])), width, "      ")
    return out


def to_json(summary, created):
    data = {
        "schema_version": SUMMARY_SCHEMA_VERSION, "kind": "envcheck-summary",
        "envcheck_version": __version__, "created": created,
        "inputs": list(summary.inputs), "nodes": len(summary.records),
        "will_work": len(summary.working),
        "working_hosts": [r.host for r in summary.working],
        "groups": [{"status": g.status, "reasons": list(g.reasons), "hosts": list(g.hosts)}
                   for g in summary.groups],
        "outliers": [{"fact": o.fact, "value": o.value, "hosts": list(o.hosts),
                      "majority": o.majority, "majority_count": o.majority_count}
                     for o in summary.outliers],
        "problems": [{"path": p.path, "error": p.error} for p in summary.problems],
        "builds": [{"build": g.build, "hosts": list(g.hosts), "held_back": g.held_back}
                   for g in summary.builds],
        "notes": [{"path": p.path, "note": p.error} for p in summary.notes],
        "nodes_detail": [{"host": r.host, "file": r.path, "kind": r.kind, "status": r.status,
                          "reasons": list(r.reasons), "facts": r.facts}
                         for r in summary.records],
        "exit_code": int(summary.exit_code),
    }
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

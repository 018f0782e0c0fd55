"""An ``Explanation`` as text (a screen) or JSON (``schema/explain.schema.json``).

Whatever the log held, what is shown passes through ``core.redact`` (a token in a
command line, a password in a URL) and, on a screen, loses control characters.
"""

import json
import os
import re
import textwrap

from .. import __version__
from ..core import redact
from ..core.frameworks import FRAMEWORKS
from ..core.text import printable, rank_set, shorten
from ..matrix.framework_advice import phrase
from ..explain.explainer import NEXT_STEPS, WITH_NCCL_INFO
from ..explain.structure import exception_dict

SCHEMA_VERSION = 1
LINE_LIMIT = 240
# The screen's source line: the links a user can open (each signature's whole source,
# every release read and every quote, is -v's and the JSON's). Most sources are long (the
# median 465 characters, the longest 1,700: six to twenty lines at 80 columns).
LINKS = re.compile(r"https?://[^\s;,'\"()<>]*[^\s;,'\"()<>.:]")
LINKS_SHOWN = 3
PLAIN_SOURCE = 160  # a source without links, shown whole up to this length


def source_line(source, verbose=False):
    """What the screen says of a signature's ``source``: whole with ``verbose`` or when
    short; else its links (at most LINKS_SHOWN, the rest counted), or its first clause
    when it has none, and where the rest is."""
    if verbose or len(source) <= PLAIN_SOURCE:
        return source
    links = list(dict.fromkeys(LINKS.findall(source)))
    if links:
        more = len(links) - LINKS_SHOWN
        shown = "; ".join(links[:LINKS_SHOWN]) + (
            "; %d more link%s" % (more, "" if more == 1 else "s") if more > 0 else "")
        return "%s (in full: -v)" % shown
    head = re.split(r" \(|; ", source, maxsplit=1)[0]
    return "%s (in full: -v)" % head


def _who(f):
    parts = []
    if f.ranks:
        parts.append(rank_set(f.ranks))
    if f.hosts:
        hosts = sorted(f.hosts)
        parts.append("host%s %s%s" % ("s" if len(hosts) > 1 else "", ", ".join(hosts[:5]),
                                      " and %d more" % (len(hosts) - 5) if len(hosts) > 5
                                      else ""))
    return parts


def _framework_advice(f, frameworks):
    variants = dict(f.signature.framework_advice)
    return phrase(variants, {k: "" for k in frameworks}, "seen in the log")


def finding_dict(f, frameworks):
    s = f.signature
    variants = dict(s.framework_advice)
    return {"id": s.id, "cause": getattr(f, "cause", s.cause), "advice": s.advice,
            "framework_advice": [{"framework": k, "advice": variants[k]}
                                 for k in FRAMEWORKS if k in frameworks and k in variants],
            "sources": [s.source], "line": shorten(f.line.shown, 2000), "file": f.file,
            "line_number": f.line.number, "ranks": sorted(f.ranks),
            "hosts": sorted(f.hosts), "count": f.count, "symptom": s.symptom,
            "gpu_only": s.gpu, "caught_by": list(s.caught_by), "values": f.values,
            "exception": (exception_dict(f.exception) if getattr(f, "exception", None)
                          else None)}


def to_dict(x):
    nothing = not x.findings and x.exit_code != 0
    return redact.deep({
        "schema_version": SCHEMA_VERSION, "envcheck_version": __version__,
        "inputs": x.inputs,
        "findings": [finding_dict(f, x.frameworks) for f in x.findings],
        "consequences": [finding_dict(f, x.frameworks) for f in x.consequences],
        "facts": x.facts.to_list(),
        "judgements": [j.to_dict() for j in x.judgements],
        "frameworks": list(x.frameworks),
        "structure": x.structure_data or {"first_failure": None, "rank_first_errors": [],
                                          "collectives": [], "behind": None, "cut_tracebacks": [],
                                          "summary": []},
        "next_steps": _next_steps(x) if nothing else [],
    })


def _next_steps(x):
    """What to collect when nothing was recognised: first the lines a log cut inside a
    traceback lacks."""
    steps = list(NEXT_STEPS)
    if x.facts.nccl_info:
        steps[0] = WITH_NCCL_INFO
    return [cut.next_step() for cut in x.cut] + steps


def to_json(x):
    return json.dumps(to_dict(x), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


NAMED_INPUTS = 3  # more logs than this are counted in the first line, not named


def _inputs(x):
    """The logs read, for the first line: named (an empty one said so), or, more than
    NAMED_INPUTS of them (torchrun's --log-dir: two files a rank), counted, with the
    directory they share; each finding names its own file."""
    lines = sum(i["lines"] for i in x.inputs)
    count = "%s line%s" % ("{:,}".format(lines), "" if lines == 1 else "s")
    if len(x.inputs) <= NAMED_INPUTS:
        return "%s (%s)" % (", ".join(i["name"] + (" (empty)" if not i["bytes"] else "")
                                      for i in x.inputs), count)
    empty = sum(not i["bytes"] for i in x.inputs)
    try:
        under = os.path.commonpath([i["name"] for i in x.inputs])
    except ValueError:  # stdin among them, or relative and absolute paths mixed
        under = ""
    return "%d logs%s (%s%s)" % (len(x.inputs), " under %s" % under if under else "",
                                 "%d empty, " % empty if empty else "", count)


def _finding(f, frameworks, verbose=False):
    s = f.signature
    out = ["✗ %s" % getattr(f, "cause", s.cause)]
    who = _who(f) + ["%d line%s, first at %s" % (f.count, "" if f.count == 1 else "s",
                                                  f.where)]
    out.append("  " + " · ".join(who))
    out.append("  > %s" % shorten(f.line.shown, LINE_LIMIT))
    if f.values:
        out.append("  values: %s" % ", ".join("%s (%s)" % kv for kv in f.values.items()))
    out.append("  fix: %s" % s.advice)
    out += ["  %s" % line for line in _framework_advice(f, frameworks)]
    out.append("  source: %s" % source_line(s.source, verbose))
    if s.caught_by:
        out.append("  caught before the job by: %s%s" % (
            ", ".join(s.caught_by),
            " (GPU only: matched on real texts, unverified on hardware here)" if s.gpu else ""))
    return out


# A command to paste, in an advice: python's -c with its quoted code, or a launcher with
# its options (torchrun --nproc_per_node N, srun --label, accelerate launch
# --main_process_port 0: an option's value after a blank only where it is a number or N).
# Kept on one line (a longer one overflows it whole, as a long URL does): split, it no
# longer pastes.
COMMAND = re.compile(r"\bpython[\d.]* -c '[^']*'"
                     r"|\b(?:torchrun|srun|sbatch|mpirun|deepspeed|accelerate launch)"
                     r"(?: --?[\w.-]+(?:=[^\s,;)]+| (?:N|\d+)\b)?)+")
KEEP = "\u00a0"  # no-break space: textwrap breaks at ASCII whitespace only


def _fit(lines, width):
    """Lines wrapped to ``width`` columns (a terminal's); words are never broken, so a
    URL or a path stays whole, nor a command to paste (COMMAND). ``width`` None (a pipe,
    a file): whole lines."""
    if not width:
        return lines
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        body = COMMAND.sub(lambda m: m.group(0).replace(" ", KEEP), line.lstrip(" "))
        indent = " " * (len(line) - len(line.lstrip(" ")))
        more = indent + ("  " if body[:2] in ("✗ ", "> ", "- ") else "    ")
        out += [w.replace(KEEP, " ") for w in textwrap.wrap(
            body, width, initial_indent=indent, subsequent_indent=more,
            break_long_words=False, break_on_hyphens=False)] or [line]
    return out


def render(x, width=None, verbose=False):
    """The explanation as text; ``width``: the terminal's columns (None: whole lines);
    ``verbose``: each signature's whole source, not only its links."""
    out = []
    if x.findings:
        n = len(x.findings)
        out.append("envcheck explain: %d cause%s found in %s" % (n, "" if n == 1 else "s",
                                                                _inputs(x)))
        for f in x.findings:
            out += [""] + _finding(f, x.frameworks, verbose)
        if x.consequences:
            out += ["", "also seen, usually consequences of the above:"]
            for f in x.consequences:
                out.append("  - %s (%s; %s)" % (f.signature.cause, f.signature.id,
                                                " · ".join(_who(f) + ["first at %s" % f.where])))
    else:
        out.append("envcheck explain: no known cause in %s" % _inputs(x))
    if x.structure:
        out += ["", "how the job failed:"] + ["  %s" % line for line in x.structure]
    facts = x.facts.to_list()
    if facts or x.judgements:
        out += ["", "versions in the log:"]
        for fact in facts:
            where = rank_set(fact["ranks"]) if fact["ranks"] else ", ".join(fact["hosts"])
            out.append("  %s %s (%s%s)" % (fact["label"], fact["value"], fact["line"],
                                           ", " + where if where else ""))
        for j in x.judgements:
            out.append("  %s %s" % ({"ok": "✓", "note": "!", "problem": "✗"}[j.verdict], j.text))
    if x.frameworks:
        out += ["", "framework seen in the log: %s" % ", ".join(
            FRAMEWORKS[k].name for k in x.frameworks)]
    if not x.findings and x.exit_code != 0:
        out += ["", "collect next:"] + ["  - %s" % step for step in _next_steps(x)]
    return printable(redact.text("\n".join(_fit(out, width)) + "\n"))

"""``envcheck check`` answers as text (a line per criterion) and as JSON."""

import dataclasses
import json

from . import vocabulary
from ..core.text import wrap
from ..preinstall.evaluate import FAIL, INDEX_URL, OK, SKIP, UNKNOWN, WARN

GLYPH = {OK: "✓", FAIL: "✗", WARN: "!", SKIP: "-", UNKNOWN: "?"}
LABEL = {"wheel": "wheel", "driver": "driver", "gpu_driver": "driver/GPU",
         "gpu": "GPU arch", "cudnn": "cuDNN", "glibc": "glibc",
         "known_issues": "known issues"}
CHECK_SCHEMA_VERSION = 1


def node_line(node):
    def mark(field):
        return " (given)" if field in node.given else ""
    gpus = {}
    for g in node.gpus:
        gpus.setdefault((g.name, g.sm), []).append(g.index)
    gpu_text = ", ".join("%d× %s %s" % (len(ix), name, sm) if name != "--gpu" else
                         "%d× %s" % (len(ix), sm) for (name, sm), ix in gpus.items())
    return "%s %s, Python %s%s, glibc %s%s, driver %s%s, GPUs: %s%s" % (
        node.system, node.machine, node.python_full, mark("python"), node.glibc or "none",
        mark("glibc"), node.driver or "none", mark("driver"), gpu_text or "none",
        mark("gpus"))


def _criterion_lines(c, width):
    label = "%s %-12s " % (GLYPH[c.status], LABEL.get(c.id, c.id))
    text = c.message
    if c.unconfirmed:
        text += " [UNCONFIRMED in the matrix: %s]" % ", ".join(c.unconfirmed)
    out = wrap(text, width, initial_indent="  " + label,
                        subsequent_indent=" " * (len(label) + 2))
    if c.source and c.status in (FAIL, WARN):  # a "no" names the fact's source
        out += wrap("source: " + c.source, width,
                             initial_indent=" " * (len(label) + 2),
                             subsequent_indent=" " * (len(label) + 4))
    return out


def _issue_lines(e, width):
    out = ["  %s (%s, %s #%d)" % (", ".join(e.checks), "/".join(e.outcome), e.where.file,
                                  e.where.index)]
    if e.advice:
        out += wrap(e.advice, width, initial_indent="    → ",
                             subsequent_indent="      ")
    if e.source:
        out += wrap("source: " + e.source, width, initial_indent="      ",
                             subsequent_indent="        ")
    if e.observed:
        builds = [o.torch for o in e.observed]
        if len(builds) > 4:
            builds = builds[:2] + ["…"] + builds[-1:]
        last = e.observed[-1]
        out += wrap("observed on %d build%s: %s (envcheck %s, %s)" % (
            len(e.observed), "" if len(e.observed) == 1 else "s", ", ".join(builds),
            last.envcheck, last.date), width, initial_indent="      ",
            subsequent_indent="        ")
    return out


def render(result, width=None, verbose=False):
    """result: preinstall.checker.Result. ``width``: the terminal's columns (every line
    fits); None for pipes and files, which keep whole lines (a pip command stays one).
    ``verbose``: each known issue with its advice, source and the builds it was seen on
    (else a line each)."""
    terminal, width = width, width or 100
    out = ["node: " + node_line(result.node)]
    out += ["note: %s" % n for n in result.node.notes]
    if result.answer is not None:
        out += _answer_lines(result, width, verbose)
    if result.suggestions is not None:
        out += _suggestion_lines(result, width)
    return "\n".join(_within(out, terminal) if terminal else out) + "\n"


PIP = "pip install "


def _within(lines, width):
    """Every line within the screen: a longer one wraps under its own indent. A pip
    command is never split (copied, it must run): it goes whole on a line of its own."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        at = line.find(PIP)
        head, command = (line[:at].rstrip(), line[at:].strip()) if at >= 0 else (line, "")
        if "  [" in command:  # '  [6 known issues]' after it: beside the build instead
            command, tail = command.split("  [", 1)
            head += "  [" + tail
        if head.strip():
            out += wrap(head, width, subsequent_indent=indent) or [head]
        if command:
            pad = indent if len(indent) + len(command) <= width else \
                ("  " if len(command) + 2 <= width else "")
            out.append(pad + command)
    return out


def _issue_line(e):
    return "  ! %s: %s" % (", ".join(e.checks), vocabulary.advice_gist(e.advice) or
                           "/".join(e.outcome))


def _answer_lines(result, width, verbose=False):
    """The pinned build: each criterion, its known issues, then the verdict line with
    the fact that decided it, and the commands of builds that would work."""
    a = result.answer
    out = ["", "%s on this node:" % a.build.name]
    out += ["note: %s" % n for n in a.notes]
    for c in a.criteria:
        if c.id == "known_issues" and not verbose and " (see below)" in c.message:
            # the list below names them, a line each
            c = dataclasses.replace(c, message=c.message.split(" (see below)")[0] +
                                    " (below)")
        out += _criterion_lines(c, width - 4)
    if a.known_issues and verbose:
        out += ["", "Known distributed-training issues of %s (from the matrix):"
                % a.build.name]
        for e in a.known_issues:
            out += _issue_lines(e, width - 8)
    elif a.known_issues:
        out += ["", "Known torch pitfalls of %s (-v: advice, sources):" % a.build.name]
        out += [_issue_line(e) for e in a.known_issues]
    out.append("")
    unknown = [LABEL.get(c.id, c.id) for c in a.criteria if c.status == UNKNOWN]
    if a.works and unknown:
        out.append("? %s: nothing fails, but the matrix cannot judge %s: %s"
                   % (a.build.name, ", ".join(unknown), a.build.pip))
    elif a.works and result.cpu_instead:
        out.append("✓ %s will work here, on CPU only (no NVIDIA GPU): install the CPU "
                   "build, without gigabytes of CUDA libraries: %s"
                   % (a.build.name, result.cpu_instead.pip))
    elif a.works:
        out.append("✓ %s will work here: %s" % (a.build.name, a.build.pip))
    else:
        # The fact that decided it, next to the answer: the criteria scrolled by above.
        out.append("✗ %s will not work here: %s"
                   % (a.build.name, "; ".join(c.short or "%s failed" % LABEL.get(c.id, c.id)
                                              for c in a.failed)))
        if result.python_releases:
            series = result.python_releases
            out.append("Python %s has torch wheels in release%s %s: envcheck check "
                       "'torch==%s.*' to ask about the newest"
                       % (result.node.python, "" if len(series) == 1 else "s",
                          "%s–%s" % (series[0], series[-1]) if len(series) > 1 else series[0],
                          series[-1]))
        elif any(c.id == "wheel" and c.status == FAIL and "Python" in c.short
                 for c in a.criteria):
            out.append("No torch release in the matrix has wheels for Python %s."
                       % result.node.python)
        if result.alternatives:
            out.append("Builds of %s that would work here:" % a.build.torch)
            out += ["  %-18s %s" % (b.build.name, b.build.pip) for b in result.alternatives]
        elif any(c.id == "gpu_driver" and c.status == FAIL for c in a.criteria):
            out.append("No torch build can help until the driver changes: this driver "
                       "cannot run these GPUs (driver/GPU above).")
        elif result.suggestions is None:
            out.append("No other build of %s works here: 'envcheck check --suggest' "
                       "lists the ones that do." % a.build.torch)
    return out


def _suggestion_lines(result, width):
    """--suggest: the newest builds that work here, with what to watch for."""
    out = ["", "Newest torch builds that will work here:" if result.suggestions
           else "No torch build in the matrix will work here."]
    cpu_only = not result.node.gpus
    if cpu_only and any(s.build.variant != "cpu" for s in result.suggestions or ()):
        out.append("  (no NVIDIA GPU here: these CUDA builds run on CPU only; the smaller "
                   "CPU wheels are at %s)" % (INDEX_URL % "cpu"))
    for s in result.suggestions:
        flags = [c for c in s.criteria if c.status in (WARN, UNKNOWN) and
                 c.id != "known_issues" and not (cpu_only and c.id == "driver")]
        extra = "  (%s)" % "; ".join("%s %s" % (GLYPH[c.status], c.message)
                                     for c in flags) if flags else ""
        failing = {c for e in s.known_issues for c in e.checks}
        issues = "  [%d known issue%s]" % (len(failing), "" if len(failing) == 1
                                           else "s") if failing else ""
        out.append("  %-18s %s%s" % (s.build.name, s.build.pip, issues))
        if extra:
            out += wrap(extra.strip(), width - 8, initial_indent="      ",
                        subsequent_indent="      ")
    return out + _issue_differences(result.suggestions or (), width)


def _issue_differences(suggestions, width):
    """Where the [N known issues] of two builds differ, which checks make the difference:
    a newer build with more is not worse, its pitfalls each have their fix (-v)."""
    failing = [(s.build.name, {c for e in s.known_issues for c in e.checks})
               for s in suggestions]
    lines = []
    for (newer, a), (older, b) in zip(failing, failing[1:]):
        for build, only, other in ((newer, a - b, older), (older, b - a, newer)):
            if only:
                lines += wrap("%s: %s, which %s does not have" % (
                    build, ", ".join(sorted(only)), other), width,
                    initial_indent="  ", subsequent_indent="    ")
    if not lines:
        return []
    return ["", "Why the known issues differ (each has its fix: envcheck check "
                "torch==VERSION -v):"] + lines


def _answer_dict(a):
    return {"torch": a.build.torch, "variant": a.build.variant, "build": a.build.name,
            "default_pypi_build": a.build.default, "pip": a.build.pip, "works": a.works,
            "criteria": [{"id": c.id, "status": c.status, "message": c.message,
                          "numbers": c.numbers, "unconfirmed": list(c.unconfirmed),
                          "source": c.source, "short": c.short}
                         for c in a.criteria],
            "known_issues": [e.to_dict() for e in a.known_issues],
            "notes": list(a.notes)}


def to_json(result):
    data = {"schema_version": CHECK_SCHEMA_VERSION, "kind": "envcheck-check",
            "envcheck_version": result.envcheck_version, "host": result.host,
            "created": result.created,
            "requirement": result.requirement, "node": result.node.to_dict(),
            "answer": _answer_dict(result.answer) if result.answer else None,
            "alternatives": [_answer_dict(b) for b in result.alternatives],
            "suggestions": None if result.suggestions is None else
            [_answer_dict(s) for s in result.suggestions],
            "python_releases": result.python_releases,
            "cpu_instead": None if result.cpu_instead is None else
            {"build": result.cpu_instead.name, "pip": result.cpu_instead.pip},
            "resolution": result.resolution.to_dict() if result.resolution else None,
            "matrix": result.matrix_files, "exit_code": int(result.exit_code),
            "seconds": result.seconds}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

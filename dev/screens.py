"""The screens in README.md and docs/screens.md, generated from real runs, never typed.

    python dev/screens.py           # run each command, rewrite its sample in place
    python dev/screens.py --check   # exit 1 naming each sample whose structure differs

A sample is the fenced block, under a given heading, that holds the line ``$ COMMAND``
for a COMMAND of ``SCREENS``. The command runs in a pseudo-terminal 80 columns wide
(tests/terminal.py: script(1)), in a scratch directory holding what it reads (``ours.py``
and ``team/`` for an unexpected failure, ``job.log`` for explain, ``answers/`` for
summary); its sample becomes what the terminal showed after the live view, without
colour, this machine's paths written as a user's. A sample may keep only its first and
last lines (``keep``), with ``...`` between. ``--check`` (and tests/test_docs_screens.py)
compares the *structure* of a fresh run with the committed sample: the probe rows, the
headings and counts, each known issue's check, the answer and the last line; times,
dates and host names aside. Needs envcheck's venv (torch 2.13.0+cpu, as the samples).
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from terminal import on_terminal, visible  # noqa: E402

PY311 = "--python-version 3.11"
Screen = collections.namedtuple("Screen", "doc heading command keep")

SCREENS = (
    Screen("README.md", "# envcheck", "envcheck run", None),
    Screen("README.md", "## Before torch is installed: `envcheck check`",
           "envcheck check torch==2.4.1+cu124 --driver 470.82.01 --gpu sm_80 " + PY311,
           (14, 4)),
    Screen("README.md", "## Before torch is installed: `envcheck check`",
           "envcheck check 'torch>=2.4' --glibc 2.17 --driver 535.104.05 --gpu sm_80 "
           + PY311, (8, 0)),
    Screen("README.md", "### The whole cluster: `envcheck summary`",
           "envcheck summary answers/", None),
    Screen("README.md", "## After a job failed: `envcheck explain`",
           "envcheck explain job.log", None),
    Screen("docs/screens.md", "## `envcheck run` on a healthy node", "envcheck run", None),
    Screen("docs/screens.md", "## `envcheck run` with one UNEXPECTED",
           "envcheck run --probe-path ours.py --matrix team", None),
    Screen("docs/screens.md", "## `envcheck run -v`",
           "envcheck run -v -p collectives -p nccl", None),
    Screen("docs/screens.md", "## `envcheck probes`", "envcheck probes", None),
    Screen("docs/screens.md", "## `envcheck check`",
           "envcheck check torch==2.4.1+cu124 --driver 470.82.01 --gpu sm_80 " + PY311,
           None),
    Screen("docs/screens.md", "## `envcheck check --suggest`",
           "envcheck check --suggest --driver 535.104.05 --gpu sm_80 " + PY311, None),
    Screen("docs/screens.md", "## `envcheck summary`", "envcheck summary answers/", None),
    Screen("docs/screens.md", "## `envcheck explain`", "envcheck explain job.log", None),
)

OURS = '''CHECKS = ("sums",)


def probe_ours(ctx):
    """a check our cluster expects to pass"""
    with ctx.check("sums") as c:
        c.fail("rank 1 sums to 7, rank 0 to 6")
'''
TEAM = ('[[expectation]]\ncheck = "ours.sums"\ntorch = ">=1.0"\noutcome = "passed"\n'
        'source = "our cluster, every week"\n')
LOG = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-pickle-group.log")
H100 = "--gpu sm_90 " * 8
# The README's cluster: 14 nodes work (node12 with half the GPUs, node13 on a newer
# driver), 4 do not, for three reasons.
NODES = ([("node%02d" % i, "--driver 535.104.05 " + H100 + PY311) for i in range(1, 12)]
         + [("node12", "--driver 535.104.05 " + "--gpu sm_90 " * 4 + PY311),
            ("node13", "--driver 550.54.15 " + H100 + PY311),
            ("node14", "--driver 470.82.01 " + H100 + PY311),
            ("node15", "--driver 470.82.01 " + H100 + PY311),
            ("node16", "--driver 535.104.05 " + H100 + "--python-version 3.14"),
            ("node17", "--driver 570.86.16 " + "--gpu sm_120 " * 8 + PY311),
            ("node18", "--driver 535.104.05 " + H100 + PY311)])


def scratch():
    """A directory with what the commands read, in the words the samples use."""
    d = tempfile.mkdtemp(prefix="envcheck-screens-")
    with open(os.path.join(d, "ours.py"), "w") as f:
        f.write(OURS)
    os.makedirs(os.path.join(d, "team", "expectations"))
    with open(os.path.join(d, "team", "expectations", "ours.toml"), "w") as f:
        f.write(TEAM)
    shutil.copy(LOG, os.path.join(d, "job.log"))
    os.makedirs(os.path.join(d, "answers"))
    for host, args in NODES:
        subprocess.run([sys.executable, "-m", "envcheck", "check", "torch==2.6.0",
                        *args.split(), "--json", os.path.join(d, "answers", host + ".json")],
                       env=dict(os.environ, ENVCHECK_HOST=host), cwd=d, check=False,
                       stdout=subprocess.DEVNULL)
    return d


def capture(command, cwd):
    """What an 80-column terminal shows once ``command`` is done: the lines the live
    view leaves, then the screen; colour out, this machine's paths as a user's."""
    import shlex

    _, lines, _ = on_terminal(80, *shlex.split(command)[1:], cwd=cwd)
    text = "\n".join(visible(line).rstrip() for line in lines)
    venv = os.path.dirname(os.path.dirname(sys.executable))
    text = text.replace(venv, "/home/me/.venv").replace(cwd + "/", "").replace(cwd, ".")
    return text.replace(ROOT, "/home/me/envcheck").splitlines()


def _kept(lines, keep):
    if not keep or len(lines) <= sum(keep) + 1:
        return lines
    head, tail = keep
    return lines[:head] + ["..."] + (lines[-tail:] if tail else [])


FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)


def find(text, screen):
    """(start, end) of the sample's body in ``text``: the fenced block after the heading
    that holds ``$ COMMAND``; its lines from that one on are the screen."""
    at = text.index("\n" + screen.heading + "\n") if not text.startswith(screen.heading) \
        else 0
    prompt = "$ " + screen.command
    for m in FENCE.finditer(text, at):
        body = m.group(1)
        if prompt in body.splitlines():
            start = m.start(1) + body.index(prompt + "\n") + len(prompt) + 1
            return start, m.end(1)
    raise LookupError("%s: no ```block with '%s' under '%s'"
                      % (screen.doc, prompt, screen.heading))


def regenerate(screens=SCREENS, check_only=False):
    """Rewrite each sample (or, ``check_only``, say which differ): [problem lines]."""
    cwd, shots, problems = scratch(), {}, []
    try:
        for screen in screens:
            if screen.command not in shots:
                shots[screen.command] = capture(screen.command, cwd)
            path = os.path.join(ROOT, screen.doc)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            start, end = find(text, screen)
            lines = _kept(shots[screen.command], screen.keep)
            if check_only:
                sample = text[start:end].splitlines()
                problems += ["%s (%s): %s" % (screen.doc, screen.command, d)
                             for d in differences(sample, lines)]
                continue
            with open(path, "w", encoding="utf-8") as f:
                f.write(text[:start] + "\n".join(lines) + "\n" + text[end:])
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    return problems


# ---- structure: what a sample must keep true of a real run ---------------------------

_ROW = re.compile(r"^([✓!✗⧗-]) ([\w.-]+) +(.*?)  \d+\.\d\d s$")
_ISSUE = re.compile(r"^  [!✗⧗] ([\w.-]+(?:, [\w.-]+)*):")
_HEADING = re.compile(r"^[A-Z][^:]*(\(\d+\))?[^:]*:( .*)?$")
_ANSWER = re.compile(r"^([✓✗!?] |  nothing unexpected|  \d+ (UNEXPECTED|FAILURE))")


def _masked(line):
    line = re.sub(r"\d{4}-\d\d-\d\dT[\d:]+[+\-]\d\d:\d\d", "DATE", line)
    line = re.sub(r"\b\d+(\.\d+)? s\b", "T s", line)
    return re.sub(r" on \S+", " on HOST", line)


def structure(lines):
    """The lines of a screen that say what it found: probe rows, answers, headings (with
    their counts), each known issue's checks, the last line."""
    out = []
    for line in lines:
        row = _ROW.match(line)
        issue = _ISSUE.match(line)
        if row:
            out.append("row %s %s %s" % row.groups())
        elif issue:
            out.append("issue " + issue.group(1))
        elif _ANSWER.match(line) or (_HEADING.match(line) and not line.startswith(" ")):
            out.append(_masked(line) if _ANSWER.match(line) else
                       "heading " + _masked(line.split(": ")[0]))
    if lines:
        out.append("last " + _masked(lines[-1]))
    return out


def differences(sample, real):
    """What the committed sample gets wrong about a real run, a line each."""
    import difflib

    a, b = structure(sample), structure(real)
    return [line for line in difflib.unified_diff(a, b, "sample", "real run", n=0,
                                                  lineterm="")
            if line[:1] in "+-" and not line.startswith(("---", "+++"))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 naming each sample that differs")
    args = ap.parse_args(argv)
    problems = regenerate(check_only=args.check)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

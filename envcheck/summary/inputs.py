"""Read per-node answers: ``envcheck check --json`` files and ``envcheck run --json``
reports, from files or directories, in any mix. Every input that cannot be used is one
``Problem`` line naming its file; nothing here raises for a bad input."""

import dataclasses
import json
import os
from typing import Optional, Tuple

from ..core import limits
from ..render.answer import CHECK_SCHEMA_VERSION

FACTS = ("driver", "gpu_model", "gpu_count", "python", "glibc", "asked")


def _series(python):
    """'3.11.7' -> '3.11': a planned node says 3.11, a real one 3.11.7; nodes differ
    where the series does."""
    if not python:
        return None
    if not isinstance(python, str):
        raise TypeError("python %r is not a version" % (python,))
    parts = str(python).split(".")
    return ".".join(parts[:2])
WORKS, FAILS, UNKNOWN = "works", "fails", "unknown"


@dataclasses.dataclass(frozen=True)
class NodeRecord:
    host: str
    path: str
    kind: str  # "check" or "run"
    status: str  # works, fails, unknown
    reasons: Tuple[str, ...]  # why it fails or cannot be judged, short
    facts: dict  # FACTS -> value or None
    created: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Problem:
    path: str
    error: str


def files(paths):
    """(json files to read, problems): a directory gives its *.json files (what is not
    a regular file among them is skipped with a problem line when read)."""
    out, problems = [], []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(root, n) for root, _, names in os.walk(p)
                           for n in names if n.endswith(".json") and not n.startswith("."))
            if not found:
                problems.append(Problem(p, "no .json file in this directory"))
            out += found
        elif os.path.exists(p):
            out.append(p)
        else:
            problems.append(Problem(p, "no such file or directory"))
    return out, problems


def read(path):
    """[NodeRecord] from one file, or a Problem."""
    try:
        data = json.loads(limits.read_input(path).decode("utf-8"))
    except limits.InputError as exc:
        return Problem(path, "%s: skipped" % exc)
    except OSError as exc:
        return Problem(path, "cannot read it: %s" % (exc.strerror or exc))
    except UnicodeDecodeError:
        return Problem(path, "not JSON (not UTF-8 text)")
    except ValueError as exc:
        return Problem(path, "not JSON (%s)" % exc)
    except RecursionError:
        return Problem(path, "not JSON envcheck wrote (nested too deeply)")
    if not isinstance(data, dict):
        return Problem(path, "not an envcheck check answer or run report")
    try:
        if data.get("kind") == "envcheck-check":
            return _checked(_check(path, data))
        if "checks" in data and "environment" in data and "schema_version" in data:
            return _checked(_run(path, data))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Problem(path, "an envcheck file with a field missing or malformed (%s: %s)"
                       % (type(exc).__name__, exc))
    return Problem(path, "not an envcheck check answer or run report")


def _checked(got):
    """The records of one file, each field of the type the summary groups and sorts by
    (a host name that is a list, a driver that is an object: TypeError, a Problem)."""
    if isinstance(got, Problem):
        return got
    for r in got:
        if not isinstance(r.host, str) or not r.host:
            raise TypeError("host %r is not a name" % (r.host,))
        if r.created is not None and not isinstance(r.created, str):
            raise TypeError("created %r is not a time" % (r.created,))
        for name, value in r.facts.items():
            if value is not None and not isinstance(value, (str, int, float)):
                raise TypeError("%s %r is not a value" % (name, value))
        for reason in r.reasons:
            if not isinstance(reason, str):
                raise TypeError("a reason %r is not text" % (reason,))
    return got


def _gpu_model(names):
    names = sorted(set(names))
    return ", ".join(names) if names else None


def _check(path, d):
    version = d.get("schema_version")
    if not isinstance(version, int) or version > CHECK_SCHEMA_VERSION:
        return Problem(path, "a check answer of schema %r: this envcheck reads up to %d "
                       "(upgrade envcheck)" % (version, CHECK_SCHEMA_VERSION))
    host = d.get("host")
    if not isinstance(host, str) or not host:
        return Problem(path, "a check answer without a host name (written by an older "
                       "envcheck?): run envcheck check --json again")
    node = d["node"]
    answer = d.get("answer")
    code = d["exit_code"]
    status = {0: WORKS, 1: FAILS, 3: UNKNOWN}.get(code)
    if status is None:
        return Problem(path, "a check answer with exit code %r" % (code,))
    reasons = ()
    if answer is not None and status != WORKS:
        wanted = "fail" if status == FAILS else "unknown"
        reasons = tuple(c.get("short") or c["message"] for c in answer["criteria"]
                        if c["status"] == wanted)
    elif answer is None and status == FAILS:
        reasons = ("no torch build in the matrix works here",)
    gpus = node.get("gpus") or []
    names = [g["sm"] if g.get("name") == "--gpu" else g.get("name") for g in gpus]
    facts = {"driver": node.get("driver"), "gpu_model": _gpu_model(names),
             "gpu_sm": _gpu_model(g.get("sm") for g in gpus), "gpu_count": len(gpus), "python": _series(node.get("python")),
             "glibc": node.get("glibc"),
             "asked": answer["build"] if answer else "--suggest",
             "requirement": d.get("requirement"), "held_back": _held_back(d)}
    return [NodeRecord(host, path, "check", status, reasons, facts, d.get("created"))]


def _held_back(d):
    """Why pip gives this node an older build than the newest in range ("glibc 2.17 <
    2.28"), from the answer's resolution; None when it gets the newest."""
    res = d.get("resolution") or {}
    chosen, newest = res.get("chosen"), res.get("newest_in_range")
    if not chosen or not newest or chosen == newest:
        return None
    return "; ".join(dict.fromkeys(s.get("short", "") for s in res.get("skipped") or ())) \
        or None


def _run(path, d):
    from ..fleet import hosts as fleet_hosts
    from ..report.model import Report

    report = Report.from_dict(d)
    env = report.environment or {}
    gpus = env.get("gpus") or []
    facts = {"driver": env.get("driver"), "gpu_model": _gpu_model(g.get("name") for g in gpus),
             "gpu_sm": _gpu_model("sm_%s" % str(g.get("capability", "")).replace(".", "")
                                  for g in gpus), "gpu_count": len(gpus), "python": _series(env.get("python")),
             "glibc": env.get("glibc"),
             "asked": "run: torch %s" % env.get("torch") if env.get("torch") else "run"}
    # A launcher-mode report covers every host of the job: each host is judged by the
    # failing checks that blame it (fleet/hosts.py), so that one bad host does not make
    # its healthy peers fail too. A run cut short judged nothing on the hosts no check
    # blames: they cannot be judged (a Ctrl-C is no reason to drain a node).
    blamed = fleet_hosts.blamed(report)
    if not blamed:
        return Problem(path, "a run report that names no host (no rank started?)")
    out = []
    for host, blames in sorted(blamed.items()):
        reasons = list(dict.fromkeys(b.check for b in blames))
        status = FAILS if reasons else UNKNOWN if report.interrupted else WORKS
        if report.interrupted:
            reasons.insert(0, "run interrupted (%s)" % report.interrupted)
        out.append(NodeRecord(host, path, "run", status, tuple(reasons), facts,
                              report.created))
    return out

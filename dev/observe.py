#!/usr/bin/env python3
"""Run envcheck against one torch interpreter and diff what it saw with the matrix.

    python dev/observe.py /path/to/venv-torch2.1.2/bin/python             # run, print diff
    python dev/observe.py VENV_PY --probe serialization --save       # also keep evidence
    python dev/observe.py --from-json report.json                    # no run: diff a report
    python dev/observe.py --release 2.2.2 --save                     # a whole release (below)
    python dev/observe.py --release all --save                       # every release: the sweep

What it prints, per check: the observed outcome, error type and first message line, the
matrix entry that applies (file and entry number) and the verdict. Lines that need a
look are marked: `new` (passed, no expectation: add a "passed" entry if it should keep
passing), `failure` (no expectation), `unexpected` and `fixed`. Then the release facts
(CUDA, NCCL, compiled archs) the matrix holds for this build against what torch reported.

With --save, the trimmed observation (per check: outcome, error type, first line of the
message) is merged into envcheck/matrix/data/evidence/torch-VERSION-VARIANT.json, the
file that expectations cite in their `observed = [{..., evidence = ...}]`. Only the
checks of the probes that ran are replaced, so probes can be observed one at a time.

With --release VERSION it observes one PyPI release end to end: a throw-away venv
(pip install --no-cache-dir torch==VERSION numpy), every variant of VARIANTS (2 and 4
ranks; the Open-Sora-shaped --model in dev/models/; -p fsdp at 2 and 4 ranks; the
default suite under torchrun, launcher mode; -p repeat --repeat 3), then
FRAMEWORK_VARIANT with dev/requirements-frameworks.txt installed where it installs, and
for releases built against NumPy 1.x (torch < 2.3) all of it again with numpy<2; each
diffed, saved with --save (label e.g. numpy1-nproc4), its full report kept under
--reports; then the venv is deleted. --variants NAME... runs only those (a new probe's
variant on every release: --release all --variants repeat). --release all is the
sweep: every release of releases.toml, one venv at a time, resumable (a state file,
one per set of --variants), timed. --verdicts prints the release x probe table of
the committed evidence judged with today's matrix; --table the check x report table of
saved reports (--from-json, repeatable). docs/matrix.md says when to run the sweep.

Exit status: 0 when observation and matrix agree, 1 when something needs a look,
2 when envcheck could not run. Runs envcheck from /tmp (a venv's torch must not see
this checkout).
"""

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from envcheck.matrix import load as matrix_load, versions  # noqa: E402
from envcheck.matrix.values import Target  # noqa: E402
from envcheck import api  # noqa: E402
from envcheck.report import model as report_mod  # noqa: E402

EVIDENCE_DIR = os.path.join(ROOT, "envcheck", "matrix", "data", "evidence")
NEEDS_LOOK = ("new", "failure", "unexpected", "fixed")
MODEL_DIR = os.path.join(ROOT, "dev", "models")
MODEL_SPEC = "mymodels.stdit:build_model"
FRAMEWORKS_REQ = os.path.join(ROOT, "dev", "requirements-frameworks.txt")


class Variant(collections.namedtuple(
        "Variant", "label nproc model probes since framework launcher args",
        defaults=((),))):
    """One run of a release: its evidence label, ranks, the Open-Sora-shaped --model or
    not, the probes ([] = the default suite), the first release it applies to, the
    --framework it asks for (its frameworks installed first), whether it runs under
    torchrun (launcher mode) instead of envcheck run, and more envcheck run arguments
    (recorded in the evidence's run as ``args``)."""

    def applies(self, release):
        return self.since is None or versions.parse_version(release) >= \
            versions.parse_version(self.since)


# With --model only the probes that use it run. FSDP2 (fully_shard) exists from 2.4; on
# older releases the fsdp probe's checks are observed skipped (saying why).
VARIANTS = (
    Variant("", 2, False, [], None, None, False),
    Variant("nproc4", 4, False, [], None, None, False),
    Variant("opensora-model", 2, True, ["serialization", "checkpoint"], None, None, False),
    Variant("nproc4-opensora-model", 4, True, ["serialization", "checkpoint"], None, None,
            False),
    Variant("fsdp", 2, False, ["fsdp"], None, None, False),
    Variant("fsdp-nproc4", 4, False, ["fsdp"], None, None, False),
    Variant("torchrun", 2, False, [], None, None, True),
    # The repeat probe alone, 3 rounds on one host: its bandwidth rounds run only with a
    # floor on one host, so a low one (10 MB/s) that a healthy loopback always meets.
    Variant("repeat", 2, False, ["repeat"], None, None, False,
            ("--repeat", "3", "--min-busbw", "0.01")),
    # The mesh probe (docs/mesh.md), 8 ranks on one host: every dimension in two layouts
    # (dp_replicate, dp_shard, tp; then pp, cp and TorchTitan's dp2ep ep). Before 2.2
    # (no init_device_mesh) the first shows mesh.layout failing, saying so.
    Variant("mesh", 8, False, ["mesh"], None, None, False,
            ("--mesh", "dp_replicate=2,dp_shard=2,tp=2")),
    Variant("mesh-pp-cp-ep", 8, False, ["mesh"], "2.2", None, False,
            ("--mesh", "pp=2,cp=2,ep=4")),
)
# After the variants above, with the frameworks of dev/requirements-frameworks.txt
# installed (those that install beside this torch).
FRAMEWORK_VARIANT = Variant("frameworks", 2, False, ["frameworks"], None, "lightning", False)



def variant_names():
    """The names --variants takes: each variant's label ("default" for the default
    suite's), then "frameworks"."""
    return [v.label or "default" for v in VARIANTS] + [FRAMEWORK_VARIANT.label]


class RunFailed(Exception):
    """envcheck (or torchrun) could not produce a report for one variant."""


def numpy_sets(release):
    """(label, pip requirement): torch < 2.3 was built against NumPy 1.x, so it is
    observed with what `pip install numpy` gives today (2.x) and with numpy<2."""
    sets = [("", "numpy")]
    if versions.parse_version(release) < versions.parse_version("2.3"):
        sets.append(("numpy1", "numpy<2"))
    return sets


def run_envcheck(python, probes, extra, cwd=None):
    fd, path = tempfile.mkstemp(prefix="envcheck-observe-", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, "-m", "envcheck", "run", "--python", python, "--json", path,
           "-q", "--format", "json"]
    for p in probes:
        cmd += ["--probe", p]
    cmd += list(extra)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(cmd, cwd=cwd or tempfile.gettempdir(), env=env,
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1) or not os.path.getsize(path):
        os.unlink(path)
        raise RunFailed("envcheck run failed (exit %d): %s" % (
            proc.returncode, proc.stderr.strip()[-2000:]))
    return path


def run_torchrun(python, nproc, extra):
    """Launcher mode: torchrun --standalone starts the ranks (python -m
    envcheck.worker.launched, which needs only torch), then this envcheck builds and
    judges the report from rank 0's records."""
    out = tempfile.mkdtemp(prefix="envcheck-observe-torchrun-")
    try:
        cmd = [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
               str(nproc), "-m", "envcheck.worker.launched", "--out", out] + list(extra)
        env = dict(os.environ, PYTHONPATH=ROOT)
        proc = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env,
                              capture_output=True, text=True)
        records = os.path.join(out, "records.jsonl")
        if not os.path.exists(records):
            raise RunFailed("torchrun exited %d and rank 0 wrote no records: %s" % (
                proc.returncode, _last_line(proc.stderr)))
        fd, path = tempfile.mkstemp(prefix="envcheck-observe-", suffix=".json")
        os.close(fd)
        rep = subprocess.run([sys.executable, "-m", "envcheck", "report", "--records",
                              records, "--json", path, "--format", "json"],
                             cwd=tempfile.gettempdir(), env=env, capture_output=True,
                             text=True)
        if rep.returncode not in (0, 1) or not os.path.getsize(path):
            os.unlink(path)
            raise RunFailed("envcheck report --records failed (exit %d): %s" % (
                rep.returncode, _last_line(rep.stderr)))
        return path
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _last_line(text):
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def trim(report):
    """The observation an expectation can cite: small, stable, no tracebacks."""
    env = report.environment or {}
    checks = {}
    for c in report.checks:
        err = c.error or {}
        checks[c.id] = {"outcome": c.outcome, "error_type": err.get("type"),
                        "message": _first_line(err.get("message")) or None,
                        "detail": _first_line(c.detail) or None}
    return {
        "envcheck": report.envcheck_version,
        "date": report.created[:10],
        "torch": env.get("torch"),
        "cuda": env.get("cuda"),
        "nccl": env.get("nccl"),
        "arch_list": env.get("arch_list") or [],
        "python": env.get("python"),
        "numpy": env.get("numpy"),
        "os": env.get("os"),
        "nproc": (report.plan or {}).get("nproc"),
        "backend": report.ranks[0].get("backend") if report.ranks else None,
        "probes": (report.plan or {}).get("probes"),
        "model": ((report.plan or {}).get("options") or {}).get("model", {}).get("spec"),
        "frameworks": env.get("frameworks") or {},
        "checks": checks,
    }


def evidence_name(obs, label=None):
    version = versions.parse_version(obs["torch"])
    variant = versions.observed_variant(obs["torch"], obs.get("cuda"))
    return "torch-%s-%s%s.json" % (version.public, variant, "-" + label if label else "")


def save(obs, directory=EVIDENCE_DIR, label=None):
    """Merge into the evidence file: replace the checks of the probes that ran."""
    path = os.path.join(directory, evidence_name(obs, label))
    old = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    ran = set(obs["probes"] or []) | {"setup"}
    checks = {k: v for k, v in (old.get("checks") or {}).items()
              if k.split(".")[0] not in ran}
    checks.update(obs["checks"])
    runs = [r for r in old.get("runs", []) if set(r.get("probes") or []) - ran]
    run = {"date": obs["date"], "envcheck": obs["envcheck"], "probes": obs["probes"],
           "nproc": obs["nproc"], "backend": obs["backend"], "model": obs["model"]}
    if obs.get("launcher"):
        run["launcher"] = obs["launcher"]
    if obs.get("args"):
        run["args"] = list(obs["args"])
    runs.append(run)
    merged = {k: obs[k] for k in ("torch", "cuda", "nccl", "arch_list", "python", "numpy",
                                  "os")}
    if obs.get("frameworks"):
        merged["frameworks"] = obs["frameworks"]
    merged["runs"] = runs
    merged["checks"] = dict(sorted(checks.items()))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def fact_lines(matrix, env):
    """The matrix's release facts for this build against what torch reported."""
    target = Target.from_environment(env)
    if target is None:
        return ["  torch did not import: no facts to compare"]
    release = matrix.release(target.torch)
    if release is None:
        return ["  the matrix has no release %s" % versions.series(target.torch)]
    variant = release.variant(target.variant)
    if variant is None:
        return ["  release %s has no variant %s" % (release.series, target.variant)]
    out = []

    def row(name, expected, seen):
        mark = " " if expected == seen else "!"
        out.append("%s %-9s matrix %-40s observed %s" % (mark, name, expected, seen))

    known = target.torch.public in release.patches
    out.append("%s %-9s matrix %-40s observed %s" % (
        " " if known else "!", "patch", " ".join(release.patches), target.torch.public))
    if variant.cuda:
        row("cuda", variant.cuda, env.get("cuda"))
        row("nccl", variant.nccl, env.get("nccl"))
        seen = sorted(a for a in env.get("arch_list") or [])
        expected = sorted(list(variant.archs) + list(variant.ptx))
        row("archs", " ".join(expected), " ".join(seen) or "(empty: no GPU?)")
    return out


def diff(path, matrix, save_to=None, label=None, launcher=None, args=()):
    """Print the diff of one report against the matrix; the number of lines that need a
    look. ``save_to``: merge the trimmed observation into that evidence directory;
    ``args``: the variant's own envcheck run arguments, kept in the evidence's run."""
    report = report_mod.load(path)
    api.judge(report, matrix, live=True)  # the verdicts, as a run gets them
    obs = trim(report)
    obs["launcher"] = launcher
    obs["args"] = list(args)
    print("torch %s (cuda %s, nccl %s), Python %s, numpy %s, %s, %s ranks%s, envcheck %s, %s"
          % (obs["torch"], obs["cuda"], obs["nccl"], obs["python"], obs["numpy"],
             obs["backend"], obs["nproc"], ", --model " + obs["model"] if obs["model"] else "",
             obs["envcheck"], obs["date"]))
    look = 0
    for c in report.checks:
        o = obs["checks"][c.id]
        entry = c.expectation
        where = "%s #%d" % (entry["file"], entry["entry"]) if entry else "-"
        mark = "!" if c.verdict in NEEDS_LOOK else " "
        look += mark == "!"
        what = "%s: %s" % (o["error_type"], o["message"]) if o["error_type"] else (
            o["detail"] or "")
        print("%s %-42s %-8s %-11s %-34s %s" % (mark, c.id, c.outcome, c.verdict or "-",
                                               where, what[:110]))
    print("release facts:")
    facts = fact_lines(matrix, report.environment)
    look += sum(line.startswith("!") for line in facts)
    print("\n".join(facts))
    if save_to:
        print("saved %s" % save(obs, save_to, label))
    print("%d line(s) need a look" % look if look else "observation and matrix agree")
    return look


def _pip(venv, *args, check=True):
    cmd = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
           "--no-cache-dir", "--disable-pip-version-check"] + list(args)
    print("$ pip install %s" % " ".join(cmd[6:]), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode and check:
        raise RunFailed("pip failed (exit %d): %s" % (proc.returncode,
                                                      proc.stderr.strip()[-2000:]))
    return proc.returncode == 0


def _frameworks():
    """The framework pins of dev/requirements-frameworks.txt."""
    with open(FRAMEWORKS_REQ, encoding="utf-8") as f:
        return [line.split("#")[0].strip() for line in f
                if line.split("#")[0].strip()]


def install_frameworks(venv, torch_req, np_req):
    """Install the frameworks beside this torch (pinned on the same line, so that pip
    never swaps the torch under observation): all at once, else each one that installs.
    Returns the pins installed."""
    pins = _frameworks()
    if _pip(venv, torch_req, np_req, *pins, check=False):
        return pins
    installed = []
    for pin in pins:
        if _pip(venv, torch_req, np_req, pin, check=False):
            installed.append(pin)
        else:
            print("  %s does not install beside %s" % (pin, torch_req), flush=True)
    return installed


def _run_variant(args, matrix, release, python, variant, name):
    """One variant: run, keep the full report, diff, save. Lines to look at."""
    extra = ["-n", str(variant.nproc)] + (["--model", MODEL_SPEC] if variant.model else [])
    if variant.framework:
        extra += ["--framework", variant.framework]
    extra += list(variant.args)
    print("\n=== torch %s, variant %s ===" % (release, name or "default"), flush=True)
    t0 = time.monotonic()
    if variant.launcher:
        path = run_torchrun(python, variant.nproc,
                            sum((["--probe", p] for p in variant.probes), []))
    else:
        path = run_envcheck(python, variant.probes, extra + list(args.extra),
                            cwd=MODEL_DIR if variant.model else None)
    kept = os.path.join(args.reports, "torch-%s%s.json" % (release, "-" + name if name else ""))
    shutil.move(path, kept)
    print("full report: %s (ran in %.1f s)" % (kept, time.monotonic() - t0))
    return diff(kept, matrix, args.evidence_dir if args.save else None, name,
                launcher="torchrun" if variant.launcher else None, args=variant.args)


def observe_release(args, matrix, release=None):
    """Every variant of one release in a throw-away venv; (variant, lines to look at),
    where lines is None for a variant that could not run (said in its line)."""
    release = release or args.release
    venv = os.path.join(args.venv_dir, "torch-%s" % release)
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(args.venv_dir, exist_ok=True)
    os.makedirs(args.reports, exist_ok=True)
    results = []
    torch_req = args.torch_spec or "torch==%s" % release
    try:
        subprocess.run([args.venv_python or sys.executable, "-m", "venv", venv], check=True)
        py_label = ""
        if args.venv_python:
            py_label = "py" + subprocess.run(
                [args.venv_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, check=True).stdout.strip()
        python = os.path.join(venv, "bin", "python")
        sets = [x for x in numpy_sets(release)
                if args.numpy == "both" or (x[0] == "numpy1") == (args.numpy == "1")]
        for n, (np_label, np_req) in enumerate(sets):
            _pip(venv, torch_req, np_req) if n == 0 else _pip(venv, np_req)
            todo = [v for v in VARIANTS if v.applies(release)
                    and (args.launcher or not v.launcher)
                    and (not args.variants or (v.label or "default") in args.variants)]
            if args.frameworks and n == len(sets) - 1 and (
                    not args.variants or FRAMEWORK_VARIANT.label in args.variants):
                todo.append(FRAMEWORK_VARIANT)
            for variant in todo:
                if variant.framework:
                    # Last: the variants above ran without any framework installed.
                    pins = install_frameworks(venv, torch_req, np_req)
                    names = {p.split("==")[0] for p in pins}
                    if not names & {"lightning", "accelerate"}:
                        results.append(("frameworks", None, "neither Lightning nor "
                                        "Accelerate installs beside %s (%s)" % (
                                            torch_req, ", ".join(_frameworks()))))
                        continue
                    if variant.framework not in names:  # its own job needs it installed
                        variant = variant._replace(framework=None)
                name = "-".join(x for x in (py_label, np_label, variant.label) if x) or None
                try:
                    look = _run_variant(args, matrix, release, python, variant, name)
                    results.append((name or "default", look, None))
                except RunFailed as exc:
                    print("could not run: %s" % exc, flush=True)
                    results.append((name or "default", None, str(exc)))
                sys.stdout.flush()
    except RunFailed as exc:
        print("could not observe torch %s: %s" % (release, exc), flush=True)
        results.append(("install", None, str(exc)))
    finally:
        if not args.keep_venv:
            shutil.rmtree(venv, ignore_errors=True)
    print("\ntorch %s:" % release)
    for name, look, why in results:
        print("  %-28s %s" % (name, "could not run: %s" % why[:200] if look is None
                              else "%d line(s) need a look" % look if look
                              else "observation and matrix agree"))
    return results


def sweep_releases(matrix):
    """The patch observed for each release series of releases.toml: its newest."""
    out = []
    for release in matrix.releases:
        patches = sorted(release.patches, key=versions.parse_version)
        out.append(patches[-1])
    return out


def sweep(args, matrix):
    """Every release of releases.toml, one venv at a time, resumable: the state file
    records each finished release (and its results), and a second run goes on from the
    first release not finished. Prints how long each release and the whole sweep took."""
    # A sweep of some variants keeps a state of its own: a release it finished is not
    # one the whole sweep finished.
    state_path = args.state or os.path.join(args.venv_dir, "envcheck-sweep-state%s.json" % (
        "".join("-" + v for v in sorted(args.variants))))
    state = {"releases": {}}
    if os.path.exists(state_path) and not args.restart:
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
    todo = sweep_releases(matrix)
    if args.only:
        unknown = sorted(set(args.only) - set(todo))
        if unknown:
            sys.exit("error: --only %s: not a release the sweep observes (%s)" % (
                ", ".join(unknown), ", ".join(todo)))
        todo = [r for r in todo if r in args.only]
    started = time.monotonic()
    print("sweep: %d releases (%s); state %s" % (len(todo), ", ".join(todo), state_path),
          flush=True)
    for release in todo:
        if release in state["releases"]:
            print("torch %s: done in an earlier run (%.0f s), skipped" % (
                release, state["releases"][release]["seconds"]), flush=True)
            continue
        t0 = time.monotonic()
        results = observe_release(args, matrix, release)
        state["releases"][release] = {
            "seconds": round(time.monotonic() - t0, 1),
            "results": [{"variant": n, "look": look, "could_not_run": why}
                        for n, look, why in results]}
        tmp = state_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1, sort_keys=True)
        os.replace(tmp, state_path)
        print("torch %s: %.0f s" % (release, time.monotonic() - t0), flush=True)
    total = sum(r["seconds"] for r in state["releases"].values())
    print("\nsweep: this run %.1f min; all releases in the state file %.1f min" % (
        (time.monotonic() - started) / 60, total / 60))
    bad = 0
    for release in todo:
        entry = state["releases"].get(release)
        for r in (entry or {}).get("results", []):
            if r["look"] or r["could_not_run"]:
                bad += 1
                print("  torch %-8s %-28s %s" % (release, r["variant"], (
                    "could not run: " + r["could_not_run"][:150]) if r["could_not_run"]
                    else "%d line(s) need a look" % r["look"]))
    print("every release: observation and matrix agree" if not bad else
          "%d variant(s) need a look (above)" % bad)
    return 1 if bad else 0


def table(paths, matrix):
    """Release x check: each report's outcome/verdict per check, one column a report."""
    cols, rows = [], {}
    for path in paths:
        report = report_mod.load(path)
        api.judge(report, matrix, live=True)
        cols.append(os.path.basename(path)[len("torch-"):-len(".json")])
        for c in report.checks:
            short = {"passed": "pass", "failed": "FAIL", "skipped": "skip"}.get(c.outcome,
                                                                              c.outcome)
            rows.setdefault(c.id, {})[cols[-1]] = (
                short if c.verdict in (None, "ok") else "%s/%s" % (short, c.verdict))
    width = max(len(k) for k in rows)
    widths = [max([len(c)] + [len(cells.get(c, "")) for cells in rows.values()])
              for c in cols]
    print("| %-*s | %s |" % (width, "check", " | ".join(
        "%-*s" % (w, c) for w, c in zip(widths, cols))))
    print("|%s|%s|" % ("-" * (width + 2), "|".join("-" * (w + 2) for w in widths)))
    for check, cells in rows.items():
        print("| %-*s | %s |" % (width, check, " | ".join(
            "%-*s" % (w, cells.get(c, "")) for w, c in zip(widths, cols))))


def verdict_table(matrix, label_filter=None):
    """Release x probe: every committed evidence file judged with today's matrix, its
    checks counted by verdict (skipped checks as 'skip'), summed over the release's runs.
    ``label_filter``: only files whose name contains it."""
    from envcheck.matrix import evidence as evidence_mod

    cells, probes = {}, []
    for ev in evidence_mod.load(matrix):
        if label_filter and label_filter not in ev.name:
            continue
        for j in evidence_mod.rejudge(ev, matrix):
            probe = j.check.split(".")[0]
            if probe not in probes:
                probes.append(probe)
            key = j.verdict or ("skip" if j.outcome == "skipped" else j.outcome)
            cell = cells.setdefault((ev.series, probe), {})
            cell[key] = cell.get(key, 0) + 1
    series = sorted({s for s, _ in cells}, key=versions.parse_version)
    order = ("ok", "known", "unsupported", "new", "fixed", "unexpected", "failure", "skip")
    print("| torch | %s |" % " | ".join(probes))
    print("|---|%s|" % "|".join("---" for _ in probes))
    for s in series:
        row = []
        for p in probes:
            cell = cells.get((s, p), {})
            row.append(" ".join("%d %s" % (cell[k], k) for k in order if cell.get(k)) or "-")
        print("| %s | %s |" % (s, " | ".join(row)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("python", nargs="?", help="interpreter of the torch venv to observe")
    ap.add_argument("--probe", action="append", default=[], help="only this probe (repeatable)")
    ap.add_argument("--from-json", action="extend", nargs="+", default=[], metavar="REPORT",
                    help="diff these saved reports instead of running")
    ap.add_argument("--release", help="observe this PyPI release in a throw-away venv, "
                                      "every variant (see above); 'all': every release "
                                      "of releases.toml, resumable (the sweep)")
    ap.add_argument("--only", action="extend", nargs="+", default=[], metavar="VERSION",
                    help="with --release all: only these releases")
    ap.add_argument("--state", help="with --release all: the sweep's state file "
                                    "[default: VENV_DIR/envcheck-sweep-state.json]")
    ap.add_argument("--restart", action="store_true",
                    help="with --release all: forget the state file, start over")
    ap.add_argument("--variants", action="extend", nargs="+", default=[], metavar="NAME",
                    help="with --release: only these variants (%s) [default: all]"
                         % ", ".join(variant_names()))
    ap.add_argument("--no-frameworks", dest="frameworks", action="store_false",
                    help="with --release: skip the frameworks variant")
    ap.add_argument("--no-launcher", dest="launcher", action="store_false",
                    help="with --release: skip the torchrun (launcher mode) variant")
    ap.add_argument("--torch-spec", help="with --release: the pip requirement for torch "
                                         "[default: torch==RELEASE]")
    ap.add_argument("--venv-dir", default=os.environ.get("ENVCHECK_OBSERVE_VENVS")
                    or tempfile.gettempdir(), help="with --release: where the venv goes "
                    "(deleted after) [default: $ENVCHECK_OBSERVE_VENVS or the temp dir]")
    ap.add_argument("--keep-venv", action="store_true", help="with --release: keep it")
    ap.add_argument("--venv-python", help="with --release: build the venv with this Python "
                                          "(its evidence is labelled pyX.Y) [default: this one]")
    ap.add_argument("--numpy", choices=("both", "2", "1"), default="both",
                    help="with --release of a torch < 2.3: which numpy majors [default: both]")
    ap.add_argument("--reports", help="with --release: keep the full reports here "
                                      "[default: VENV_DIR/envcheck-reports]")
    ap.add_argument("--table", action="store_true",
                    help="with --from-json: print the check x report table instead")
    ap.add_argument("--verdicts", nargs="?", const="", metavar="LABEL",
                    help="no run: the release x probe table of verdicts of every committed "
                         "evidence file judged with today's matrix (only files whose name "
                         "holds LABEL)")
    ap.add_argument("--matrix", action="append", default=[], help="extra matrix directory")
    ap.add_argument("--save", action="store_true", help="merge the observation into evidence/")
    ap.add_argument("--evidence-dir", default=EVIDENCE_DIR)
    ap.add_argument("--label", help="suffix of the evidence file, for runs that differ by "
                                    "more than the torch build (e.g. opensora-model)")
    ap.add_argument("extra", nargs="*", help="more envcheck run arguments (after --)")
    args = ap.parse_args(argv)
    if not args.python and not args.from_json and not args.release \
            and args.verdicts is None:
        ap.error("give an interpreter, --release, --from-json or --verdicts")
    unknown = [v for v in args.variants if v not in variant_names()]
    if unknown:
        ap.error("--variants %s: no such variant (the variants: %s)" % (
            ", ".join(unknown), ", ".join(variant_names())))
    try:
        matrix = matrix_load.load(args.matrix)
    except matrix_load.MatrixError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.verdicts is not None:
        verdict_table(matrix, args.verdicts)
        return 0
    if args.release:
        args.reports = args.reports or os.path.join(args.venv_dir, "envcheck-reports")
        if args.release == "all":
            return sweep(args, matrix)
        return 1 if any(look or look is None for _, look, _ in observe_release(args, matrix)) \
            else 0
    if args.table:
        table(args.from_json, matrix)
        return 0
    paths = args.from_json or [run_envcheck(args.python, args.probe, args.extra)]
    if not args.from_json:
        print("full report: %s (diff it again with --from-json)" % paths[0])
    looks = []
    for path in paths:
        looks.append(diff(path, matrix, args.evidence_dir if args.save else None,
                          args.label))
    if len(paths) > 1:
        print("\n%d reports:" % len(paths))
        for path, look in zip(paths, looks):
            print("  %-50s %s" % (os.path.basename(path), "%d line(s) need a look" % look
                                  if look else "observation and matrix agree"))
    return 1 if any(looks) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Read the matrix TOML files, validate them as a whole, build the immutable ``Matrix``.

Every problem is collected, with its file, line and entry, and reported together in one
``MatrixError`` (exit 2): a malformed file, an unknown key or check id, an invalid range
or pattern, an expectation without evidence, and two expectations that contradict each
other for some torch build. ``--matrix DIR`` adds its files; a file with the same
relative name as a built-in one replaces it, which is how a team overrides an entry.
"""

import os
import re

from packaging.version import Version

from ..core import limits
from ..probes import catalog
from . import versions
from ..core.errors import UsageError
from . import facts, signatures as sig_mod
from .values import (BACKENDS, BAD_OUTCOMES, OUTCOMES, PLATFORMS, Expectation, Matrix, MatrixFile,
                     Observation, PatchFacts, Release, Target, Toolkit, Variant, Where)

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

BUILTIN_DIR = os.path.join(os.path.dirname(__file__), "data")
KINDS = ("release", "cuda", "expectation", "signature") + facts.KINDS
TOP_KEYS = set(KINDS) | {"about"}
# Checks that report several findings, each judged on its own (matrix.verdicts).
FINDING_CHECKS = ("hosts.skew",)

_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
_PTX = re.compile(r"^compute_\d{2,3}[af]?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_HEADER = re.compile(r"^\s*\[\[\s*(%s)\s*\]\]" % "|".join(KINDS))

RELEASE_KEYS = {"torch", "patches", "python", "default", "glibc", "variants", "source",
                "manylinux", "released", "unconfirmed", "note", "python_supported",
                "per_patch"}
PATCH_KEYS = {"python", "source", "unconfirmed", "note"}
VARIANT_KEYS = {"cuda", "archs", "ptx", "nccl", "cudnn", "glibc", "unconfirmed", "note",
                "source"}
CUDA_KEYS = {"version", "min_driver", "compat_driver", "archs", "source", "unconfirmed",
             "note"}
EXPECTATION_KEYS = {"check", "torch", "cuda", "variants", "python", "platform", "backend",
                    "model", "outcome", "numpy", "unsupported",
                    "message", "advice", "source", "observed", "note", "framework_advice"}
OBSERVED_KEYS = {"torch", "envcheck", "date", "evidence", "frameworks"}


class MatrixError(UsageError):
    def __init__(self, errors):
        self.errors = list(errors)
        head = "the matrix has %d error%s (fix them, then run 'envcheck matrix --validate'):" \
            % (len(self.errors), "" if len(self.errors) == 1 else "s")
        super().__init__("\n  ".join([head] + self.errors))


def _display(path):
    try:
        rel = os.path.relpath(path)
    except (OSError, ValueError):  # no current directory to be relative to
        return path
    return rel if not rel.startswith("..") else path


def matrix_files(extra_dirs=()):
    """{relative name: MatrixFile}: built-ins, then each --matrix DIR over them."""
    files = {}
    for directory, builtin in [(BUILTIN_DIR, True)] + [(d, False) for d in extra_dirs]:
        if not builtin and not os.path.isdir(directory):
            raise UsageError("--matrix %s: no such directory" % directory)
        found = 0
        for root, dirs, names in os.walk(directory):
            dirs.sort()
            for name in sorted(names):
                if name.endswith(".toml"):
                    path = os.path.join(root, name)
                    rel = os.path.relpath(path, directory).replace(os.sep, "/")
                    files[rel] = MatrixFile(rel, _display(path), builtin)
                    found += 1
        if not builtin and not found:
            raise UsageError("--matrix %s holds no .toml file" % directory)
    return files


class _Errors(list):
    def add(self, where, message):
        self.append("%s: %s" % (where, message))


def _lines(text):
    out = {k: [] for k in KINDS}
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            out[m.group(1)].append(n)
    return out


def _str_list(value):
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("expected a string or a list of strings, got %r" % (value,))


def _unknown_keys(errors, where, entry, allowed):
    for key in sorted(set(entry) - allowed):
        errors.add(where, "unknown key %r (allowed: %s)" % (key, ", ".join(sorted(allowed))))


def _str_lists(errors, where, label, data, *keys):
    """The string lists under KEYS (missing: empty), or None after recording the error."""
    try:
        return [_str_list(data.get(key, [])) for key in keys]
    except ValueError as exc:
        errors.add(where, "%s: %s" % (label, exc))
        return None


def _variant(errors, where, name, data, series):
    label = "%s variant %s" % (series, name)
    if not isinstance(data, dict):
        errors.add(where, "%s: expected a table" % label)
        return None
    _unknown_keys(errors, where, data, VARIANT_KEYS)
    if not versions.is_variant(name):
        errors.add(where, "%s: variant names are cpu, cuXYZ or rocmX.Y" % label)
        return None
    lists = _str_lists(errors, where, label, data, "archs", "ptx", "unconfirmed")
    if lists is None:
        return None
    archs, ptx, unconfirmed = lists
    for a in archs:
        if not _ARCH.match(a):
            errors.add(where, "%s: arch %r is not sm_XY" % (label, a))
    for p in ptx:
        if not _PTX.match(p):
            errors.add(where, "%s: ptx %r is not compute_XY" % (label, p))
    cuda = data.get("cuda")
    if name.startswith("cu"):
        try:
            if versions.variant_for_cuda(cuda) != name:
                errors.add(where, "%s: cuda %r does not match its name" % (label, cuda))
        except ValueError as exc:
            errors.add(where, "%s: %s" % (label, exc))
    elif cuda is not None:
        errors.add(where, "%s: only cuXYZ variants have a cuda version" % label)
    glibc = data.get("glibc")
    if glibc is not None:
        _check_dotted(errors, where, "%s: glibc" % label, glibc)
    return Variant(name, cuda, archs, ptx, data.get("nccl"), data.get("cudnn"), glibc,
                   unconfirmed, data.get("note", ""))


def _check_dotted(errors, where, label, value):
    try:
        versions.driver_tuple(value)
        return True
    except ValueError:
        errors.add(where, "%s %r is not a dotted version" % (label, value))
        return False


def _release(errors, where, e):
    _unknown_keys(errors, where, e, RELEASE_KEYS)
    series = e.get("torch")
    if not isinstance(series, str) or not re.match(r"^\d+\.\d+$", series):
        errors.add(where, "torch must be a release series like \"2.4\", got %r" % (series,))
        return None
    lists = _str_lists(errors, where, "release %s" % series, e, "patches", "python",
                       "unconfirmed", "python_supported")
    if lists is None:
        return None
    patches, python, unconfirmed, supported = lists
    for py in supported:
        if py not in python:
            errors.add(where, "release %s: python_supported %s is not among its wheels' "
                       "python (%s)" % (series, py, ", ".join(python)))
    if not patches:
        errors.add(where, "release %s: patches is empty" % series)
    for p in patches:
        try:
            if versions.series(p) != series:
                errors.add(where, "release %s: patch %s belongs to another series" % (series, p))
        except ValueError as exc:
            errors.add(where, "release %s: patch %s" % (series, exc))
    for py in python:
        try:
            versions.python_series(py)
        except ValueError as exc:
            errors.add(where, "release %s: python %s" % (series, exc))
    variants = []
    table = e.get("variants")
    if not isinstance(table, dict) or not table:
        errors.add(where, "release %s: needs a [release.variants.NAME] table" % series)
        table = {}
    for name, data in table.items():
        v = _variant(errors, where, name, data, series)
        if v:
            variants.append(v)
    default = e.get("default")
    if default not in table:
        errors.add(where, "release %s: default %r is not one of its variants (%s)"
                   % (series, default, ", ".join(table) or "none"))
    glibc = e.get("glibc")
    if not isinstance(glibc, str):
        errors.add(where, "release %s: glibc (the manylinux floor, e.g. \"2.17\") is "
                   "required" % series)
    else:
        _check_dotted(errors, where, "release %s: glibc" % series, glibc)
    if not e.get("source"):
        errors.add(where, "release %s: source is required (where these facts come from)"
                   % series)
    per_patch = _per_patch(errors, where, series, patches, e.get("per_patch", {}))
    return Release(series, patches, python, default, tuple(variants), glibc, e.get("source"),
                   where, e.get("manylinux", ""), e.get("released", ""), unconfirmed,
                   e.get("note", ""), supported, per_patch)


def _per_patch(errors, where, series, patches, table):
    """[release.per_patch."2.12.1"]: one patch's own wheel Python tags, with a source."""
    if not isinstance(table, dict):
        errors.add(where, "release %s: per_patch must be a table of patches" % series)
        return ()
    out = []
    for patch, data in table.items():
        label = "release %s per_patch %s" % (series, patch)
        if patch not in patches:
            errors.add(where, "%s: not one of its patches (%s)" % (label, ", ".join(patches)))
            continue
        if not isinstance(data, dict):
            errors.add(where, "%s: expected a table" % label)
            continue
        _unknown_keys(errors, where, data, PATCH_KEYS)
        lists = _str_lists(errors, where, label, data, "python")
        if lists is None:
            continue
        python, = lists
        if not python:
            errors.add(where, "%s: python (the tags of its wheels) is required" % label)
        for py in python:
            try:
                versions.python_series(py)
            except ValueError as exc:
                errors.add(where, "%s: python %s" % (label, exc))
        if not data.get("source"):
            errors.add(where, "%s: source is required (the wheel list it is read from)"
                       % label)
        unconfirmed = data.get("unconfirmed", False)
        if not isinstance(unconfirmed, bool):
            errors.add(where, "%s: unconfirmed must be true or false" % label)
            unconfirmed = True
        out.append(PatchFacts(patch, tuple(python), data.get("source", ""), unconfirmed,
                              data.get("note", "")))
    return tuple(out)


def _toolkit(errors, where, e):
    _unknown_keys(errors, where, e, CUDA_KEYS)
    version = e.get("version")
    if not isinstance(version, str) or not re.match(r"^\d+\.\d+$", version):
        errors.add(where, "version must be a CUDA major.minor like \"12.4\", got %r"
                   % (version,))
        return None
    label = "CUDA %s" % version
    min_driver = e.get("min_driver")
    if min_driver is not None:
        _check_dotted(errors, where, "%s: min_driver" % label, min_driver)
    compat = e.get("compat_driver")
    if compat is None or not _check_dotted(errors, where, "%s: compat_driver" % label, compat):
        if compat is None:
            errors.add(where, "%s: compat_driver (minor-version compatibility floor) is "
                       "required" % label)
    try:
        archs = _str_list(e.get("archs", []))
        unconfirmed = _str_list(e.get("unconfirmed", []))
    except ValueError as exc:
        errors.add(where, "%s: %s" % (label, exc))
        return None
    for a in archs:
        if not _ARCH.match(a):
            errors.add(where, "%s: arch %r is not sm_XY" % (label, a))
    if not e.get("source"):
        errors.add(where, "%s: source is required" % label)
    return Toolkit(version, min_driver, compat, archs, e.get("source"), where, unconfirmed,
                   e.get("note", ""))


def _spec(errors, where, label, value):
    if value is None:
        return None
    try:
        return versions.parse_specifier(value)
    except ValueError as exc:
        errors.add(where, "%s: %s" % (label, exc))
        return None


def _observed_frameworks(errors, where, o):
    """``frameworks = {lightning = "2.6.6"}``: the framework versions the observed run
    had (core.frameworks), for facts about a framework's own layer."""
    from ..core.frameworks import FRAMEWORKS

    value = o.get("frameworks")
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(v, str) and v
                                              for v in value.values()):
        errors.add(where, "observed frameworks must be a table of versions "
                   "{lightning = \"2.6.6\"}")
        return ()
    unknown = sorted(set(value) - set(FRAMEWORKS))
    if unknown:
        errors.add(where, "observed frameworks: unknown framework %s (known: %s)"
                   % (", ".join(map(repr, unknown)), ", ".join(FRAMEWORKS)))
    return tuple(sorted(value.items()))


def _observations(errors, where, value, directory):
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(o, dict) for o in value):
        errors.add(where, "observed must be a list of tables {torch, envcheck, date, "
                   "evidence}")
        return ()
    out = []
    for o in value:
        _unknown_keys(errors, where, o, OBSERVED_KEYS)
        missing = [k for k in ("torch", "envcheck", "date") if not o.get(k)]
        if missing:
            errors.add(where, "observed entry lacks %s" % ", ".join(missing))
            continue
        if not _DATE.match(str(o["date"])):
            errors.add(where, "observed date %r is not YYYY-MM-DD" % o["date"])
        evidence = o.get("evidence")
        if evidence and not os.path.isfile(os.path.join(directory, evidence)):
            errors.add(where, "evidence file %s does not exist (relative to %s)"
                       % (evidence, directory))
        out.append(Observation(str(o["torch"]), str(o["envcheck"]), str(o["date"]),
                               evidence, _observed_frameworks(errors, where, o)))
    return tuple(out)


def _framework_advice(errors, where, e):
    """``framework_advice = {lightning = "...", deepspeed = "..."}``: the advice in the
    words of a framework the ranks have installed (core.frameworks)."""
    from ..core.frameworks import FRAMEWORKS

    value = e.get("framework_advice")
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(v, str) and v.strip()
                                              for v in value.values()):
        errors.add(where, "framework_advice must be a table of non-empty strings "
                   "({lightning = \"...\"})")
        return ()
    unknown = sorted(set(value) - set(FRAMEWORKS))
    if unknown:
        errors.add(where, "framework_advice: unknown framework %s (known: %s)"
                   % (", ".join(map(repr, unknown)), ", ".join(FRAMEWORKS)))
    if not e.get("advice"):
        errors.add(where, "framework_advice needs the general advice too (advice = ...)")
    return tuple(sorted((k, v) for k, v in value.items() if k in FRAMEWORKS))


def _expectation(errors, where, e, directory, probes):
    _unknown_keys(errors, where, e, EXPECTATION_KEYS)
    try:
        checks = _str_list(e.get("check"))
    except ValueError:
        errors.add(where, "check must be a check id (PROBE.CHECK) or a list of them")
        return None
    for check in checks:
        reason = catalog.unknown_reason(check, probes)
        if reason:
            errors.add(where, reason)
    if "torch" not in e:
        errors.add(where, "torch (a version range, e.g. \">=2.1,<2.4\") is required")
    torch = _spec(errors, where, "torch", e.get("torch"))
    cuda = _spec(errors, where, "cuda", e.get("cuda"))
    python = _spec(errors, where, "python", e.get("python"))
    numpy = _spec(errors, where, "numpy", e.get("numpy"))
    try:
        outcome = _str_list(e.get("outcome"))
    except ValueError:
        errors.add(where, "outcome must be one of %s (or a list)" % ", ".join(OUTCOMES))
        return None
    bad = [o for o in outcome if o not in OUTCOMES]
    if bad or not outcome:
        errors.add(where, "outcome %s: choose from %s" % (", ".join(bad) or "missing",
                                                          ", ".join(OUTCOMES)))
    variants = platform = backend = None
    try:
        if "variants" in e:
            variants = _str_list(e["variants"])
            for v in variants:
                if not versions.is_variant(v):
                    errors.add(where, "variant %r: use cpu, cuXYZ or rocmX.Y" % v)
        if "platform" in e:
            platform = _str_list(e["platform"])
            for p in platform:
                if p not in PLATFORMS:
                    errors.add(where, "platform %r: choose from %s" % (p, ", ".join(PLATFORMS)))
        if "backend" in e:
            backend = _str_list(e["backend"])
            for b in backend:
                if b not in BACKENDS:
                    errors.add(where, "backend %r: choose from %s" % (b, ", ".join(BACKENDS)))
    except ValueError as exc:
        errors.add(where, str(exc))
    model = e.get("model")
    if model is not None and not isinstance(model, bool):
        errors.add(where, "model must be true (only runs with --model) or false (only the "
                   "built-in model), got %r" % (model,))
        model = None
    unsupported = e.get("unsupported", False)
    if not isinstance(unsupported, bool):
        errors.add(where, "unsupported must be true or false, got %r" % (unsupported,))
        unsupported = False
    if unsupported and not (e.get("python") or e.get("numpy")):
        errors.add(where, "unsupported = true names a combination torch does not support: "
                   "give the python or numpy range it is about")
    if unsupported and not any(o in BAD_OUTCOMES for o in outcome):
        errors.add(where, "unsupported = true is for a failure (outcome is %s)"
                   % "/".join(outcome))
    message = None
    if e.get("message") is not None:
        if outcome == ("passed",) and any(c not in FINDING_CHECKS for c in checks):
            # A pass-only entry with a pattern names findings that are harmless; only a
            # check that reports findings (matrix.verdicts.judge_findings) has them.
            errors.add(where, "message is only for failures (outcome is passed)")
        try:
            message = re.compile(e["message"])
        except (re.error, TypeError) as exc:
            errors.add(where, "message %r is not a regular expression: %s"
                       % (e["message"], exc))
    if any(o in BAD_OUTCOMES for o in outcome) and not e.get("advice"):
        errors.add(where, "advice is required for an expected failure (what should the "
                   "user do?)")
    observed = _observations(errors, where, e.get("observed"), directory)
    if not e.get("source") and not observed:
        errors.add(where, "needs evidence: a public source or an observed run")
    if torch is None or not outcome or bad:
        return None
    return Expectation(checks, torch, outcome, where, message, e.get("advice"),
                       e.get("source"), observed, cuda, variants, python, platform,
                       backend, model, e.get("note", ""), numpy, unsupported,
                       framework_advice=_framework_advice(errors, where, e))


def _read(errors, f):
    try:
        text = limits.read_input(f.path).decode("utf-8")
        return tomllib.loads(text), _lines(text)
    except tomllib.TOMLDecodeError as exc:
        errors.append("%s: malformed TOML: %s" % (f.path, exc))
    except (OSError, UnicodeDecodeError, limits.InputError) as exc:
        errors.append("%s: cannot read it: %s" % (f.path, exc))
    return None, None


def load(extra_dirs=(), probe_paths=()):
    """The whole matrix, validated; MatrixError lists every problem found."""
    files = matrix_files(extra_dirs)
    probes = catalog.known_checks(probe_paths)
    errors = _Errors()
    releases, toolkits, expectations, signatures = [], [], [], []
    node_facts = {k: [] for k in facts.KINDS}
    for f in files.values():
        data, lines = _read(errors, f)
        if data is None:
            continue
        for key in sorted(set(data) - TOP_KEYS):
            errors.append("%s: unknown top-level key %r (use %s or [about])"
                          % (f.path, key, ", ".join("[[%s]]" % k for k in KINDS)))
        for kind in KINDS:
            entries = data.get(kind, [])
            if not isinstance(entries, list):
                errors.append("%s: %s must be an array of tables: [[%s]]" % (f.path, kind, kind))
                continue
            for i, entry in enumerate(entries, 1):
                line = lines[kind][i - 1] if i <= len(lines[kind]) else None
                where = Where(f.name, f.path, kind, i, line)
                if not isinstance(entry, dict):
                    errors.add(where, "expected a table")
                    continue
                if kind == "release":
                    built, into = _release(errors, where, entry), releases
                elif kind == "cuda":
                    built, into = _toolkit(errors, where, entry), toolkits
                elif kind in node_facts:
                    built, into = facts.parse(errors, where, kind, entry), node_facts[kind]
                elif kind == "signature":
                    built = sig_mod.parse(errors, where, entry, probes, _framework_advice)
                    into = signatures
                else:
                    built = _expectation(errors, where, entry, os.path.dirname(f.path),
                                         probes)
                    into = expectations
                if built is not None:
                    into.append(built)
    _cross_check(errors, releases, toolkits, expectations)
    facts.cross_check(errors, node_facts)
    signatures = sig_mod.resolve(errors, signatures, expectations, builtin=(
        lambda: load((), probe_paths).expectations) if extra_dirs else None)
    if errors:
        raise MatrixError(errors)
    releases.sort(key=lambda r: Version(r.series))
    toolkits.sort(key=lambda t: Version(t.version))
    return Matrix(tuple(releases), tuple(toolkits), tuple(expectations),
                  tuple(files.values()),
                  facts.NodeFacts(*(tuple(node_facts[k]) for k in facts.KINDS)),
                  tuple(signatures))


def _duplicates(errors, items, key, label):
    seen = {}
    for item in items:
        k = key(item)
        if k in seen:
            errors.add(item.where, "%s %s is already defined at %s" % (label, k, seen[k]))
        else:
            seen[k] = item.where


def _cross_check(errors, releases, toolkits, expectations):
    _duplicates(errors, releases, lambda r: r.series, "release")
    _duplicates(errors, toolkits, lambda t: t.version, "CUDA")
    known_cuda = {t.version for t in toolkits}
    for r in releases:
        for v in r.variants:
            if v.cuda and v.cuda not in known_cuda:
                errors.add(r.where, "release %s variant %s: CUDA %s has no [[cuda]] entry"
                           % (r.series, v.name, v.cuda))
    for message in contradictions(expectations, releases):
        errors.append(message)


def _candidate_versions(a, b, releases):
    found = {Version(p) for r in releases for p in r.patches}
    for spec in (a.torch, b.torch):
        for s in spec:
            try:
                found.add(Version(s.version.rstrip(".*")))
            except ValueError:
                continue
    return sorted(found)


def _candidate_builds(releases):
    names = {v.name for r in releases for v in r.variants} | {"cpu"}
    return sorted(names)


def _candidate_pythons(a, b, releases):
    found = {versions.python_series(p).rstrip("t") for r in releases for p in r.python}
    for spec in (a.python, b.python):
        for s in spec or ():
            found.add(s.version.rstrip(".*"))
    return sorted(found, key=Version)


def _candidate_numpys(a, b):
    found = {"1.26.4", "2.0.0"}
    for spec in (a.numpy, b.numpy):
        for s in spec or ():
            found.add(s.version.rstrip(".*"))
    return [None] + sorted(found, key=Version)


def _overlap(a, b, releases):
    """A torch build both expectations apply to, or None. The conditions are independent,
    so each is intersected on its own: torch on every version the matrix knows and every
    version the two ranges name, the build on every variant the matrix knows, Python on
    every series the releases list and the two ranges name."""
    torch = [v for v in _candidate_versions(a, b, releases)
             if a.matches_torch(v) and b.matches_torch(v)]
    builds = [v for v in _candidate_builds(releases)
              if a.matches_build(v) and b.matches_build(v)]
    pythons = [p for p in _candidate_pythons(a, b, releases)
               if a.matches_python(p) and b.matches_python(p)]
    platforms = [p for p in PLATFORMS if a.matches_platform(p) and b.matches_platform(p)]
    backends = [x for x in BACKENDS if a.matches_backend(x) and b.matches_backend(x)]
    models = [m for m in (False, True) if a.matches_model(m) and b.matches_model(m)]
    # numpy: none, a 1.x and a 2.x, and what the two ranges name.
    numpys = [n for n in _candidate_numpys(a, b) if a.matches_numpy(n) and b.matches_numpy(n)]
    if not (torch and builds and pythons and platforms and backends and models and numpys):
        return None
    # Name a real build in the message when there is one: a variant of that release.
    for version in torch:
        release = next((r for r in releases if r.series == versions.series(version)), None)
        for v in release.variants if release else ():
            if v.name in builds:
                return Target(version, v.name, pythons[0], platforms[0], backends[0],
                          models[0])
    return Target(torch[0], builds[0], pythons[0], platforms[0], backends[0], models[0])


def contradictions(expectations, releases):
    out = []
    for i, a in enumerate(expectations):
        for b in expectations[i + 1:]:
            shared = sorted(set(a.checks) & set(b.checks))
            if not shared or set(a.outcome) & set(b.outcome):
                continue
            if a.unsupported != b.unsupported:
                continue  # an unsupported combination overlays the general entry

            target = _overlap(a, b, releases)
            if target is not None:
                out.append("%s: contradicts %s for %s on torch %s+%s%s: one expects %s, the "
                           "other %s (narrow a range, or override the file by name with "
                           "--matrix)" % (b.where, a.where, shared[0], target.torch,
                                          target.variant,
                                          " Python %s" % target.python if (a.python or b.python)
                                          else "",
                                          "/".join(a.outcome), "/".join(b.outcome)))
    return out

"""The version matrix as immutable values: releases, CUDA toolkits, expectations.

Built once by ``load.load`` from the TOML files in ``data/`` (plus any
``--matrix DIR``), never modified afterwards. Queries are pure: which release a torch
version belongs to, which toolkit a variant was built with, which expectations apply to
one check in one environment. How versions match is in ``versions.py``.
"""

import dataclasses
import re
from typing import Optional, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from . import versions

BAD_OUTCOMES = ("failed", "hang", "crash")
OUTCOMES = ("passed",) + BAD_OUTCOMES
PLATFORMS = ("linux", "darwin", "win32")
BACKENDS = ("gloo", "nccl")


@dataclasses.dataclass(frozen=True)
class Where:
    """Where an entry came from, for error messages and the JSON report."""

    file: str  # name inside its matrix directory: "expectations/serialization.toml"
    path: str  # the file on disk
    kind: str  # "release", "cuda" or "expectation"
    index: int  # 1-based position among that file's entries of this kind
    line: Optional[int] = None

    def __str__(self):
        return "%s:%s: %s #%d" % (self.path, self.line or "?", self.kind, self.index)


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str  # "cu124", "cpu"
    cuda: Optional[str]  # "12.4"; None for cpu
    archs: Tuple[str, ...] = ()  # SASS targets, "sm_80"
    ptx: Tuple[str, ...] = ()  # embedded PTX, "compute_90"
    nccl: Optional[str] = None
    cudnn: Optional[str] = None
    glibc: Optional[str] = None  # overrides the release's floor
    unconfirmed: Tuple[str, ...] = ()  # fields not verified: "exists", "archs", "ptx", "nccl"
    note: str = ""

    def is_unconfirmed(self, field):
        return field in self.unconfirmed


@dataclasses.dataclass(frozen=True)
class PatchFacts:
    """What one patch release publishes where it differs from its series: the Python
    tags of its wheels (2.12.0 has cp313t wheels, 2.12.1 has none)."""

    patch: str  # "2.12.1"
    python: Tuple[str, ...]  # "3.11", "3.13t"
    source: str
    unconfirmed: bool = False
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Release:
    series: str  # "2.4"
    patches: Tuple[str, ...]
    python: Tuple[str, ...]  # "3.11", "3.13t"
    default_variant: str
    variants: Tuple[Variant, ...]
    glibc: str
    source: str
    where: Where
    manylinux: str = ""
    released: str = ""
    unconfirmed: Tuple[str, ...] = ()
    note: str = ""
    # The Pythons the release supports, where narrower than its wheel tags (1.13.1 has
    # cp311 wheels, but PyTorch's compatibility matrix says 3.7-3.10).
    python_supported: Tuple[str, ...] = ()
    per_patch: Tuple[PatchFacts, ...] = ()  # [release.per_patch."X.Y.Z"]

    def patch_facts(self, patch):
        return next((p for p in self.per_patch if p.patch == str(patch)), None)

    def python_for(self, patch):
        """The Python tags of one patch's wheels: its own entry, else the series'."""
        own = self.patch_facts(patch)
        return own.python if own else self.python

    @property
    def supported_pythons(self):
        return self.python_supported or tuple(p for p in self.python if not p.endswith("t"))

    def variant(self, name):
        return next((v for v in self.variants if v.name == name), None)

    def glibc_for(self, variant):
        return variant.glibc or self.glibc

    @property
    def newest_patch(self):
        return max(self.patches, key=Version)


@dataclasses.dataclass(frozen=True)
class Toolkit:
    version: str  # "12.4"
    min_driver: Optional[str]  # full feature set; None when unconfirmed
    compat_driver: str  # minor-version compatibility floor of the major
    archs: Tuple[str, ...]
    source: str
    where: Where
    unconfirmed: Tuple[str, ...] = ()
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Observation:
    torch: str  # the build that ran, "2.1.2+cu121"
    envcheck: str
    date: str
    evidence: Optional[str] = None  # file under the matrix directory
    # (("lightning", "2.6.6"), ...): the framework versions the run had, for facts about
    # a framework's own layer (the frameworks probe)
    frameworks: Tuple[Tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Target:
    """What an expectation is matched against: one torch build in one environment."""

    torch: Version
    variant: str
    python: Optional[str] = None  # "3.11.7"
    platform: Optional[str] = None  # "linux"
    backend: Optional[str] = None  # "gloo" / "nccl": what the ranks ran on
    model: Optional[bool] = None  # whether the run used the user's --model
    numpy: Optional[str] = None  # the numpy the ranks import, "1.26.4"; None: none

    @property
    def cuda(self):
        return cuda_of(self.variant)

    @classmethod
    def from_environment(cls, env, backend=None, model=None):
        """The target of a report's environment; None when torch never imported."""
        torch = (env or {}).get("torch")
        if not torch:
            return None
        try:
            version = versions.parse_version(torch)
            variant = versions.observed_variant(torch, env.get("cuda"), env.get("hip"))
        except ValueError:
            return None
        return cls(version, variant, env.get("python"), platform_of(env.get("os")), backend,
                   model, env.get("numpy"))


def cuda_of(variant):
    """Version('12.4') for 'cu124'; None for cpu and rocm builds."""
    if variant.startswith("cu") and variant[2:].isdigit():
        digits = variant[2:]
        return Version("%s.%s" % (digits[:-1], digits[-1]))
    return None


def platform_of(os_text):
    """sys.platform-style name from platform.platform() ('Linux-6.1-x86_64-…')."""
    text = (os_text or "").lower()
    if text.startswith("linux"):
        return "linux"
    if text.startswith(("macos", "darwin")):
        return "darwin"
    if text.startswith("windows"):
        return "win32"
    return None


@dataclasses.dataclass(frozen=True)
class Expectation:
    checks: Tuple[str, ...]  # check ids, "serialization.pickle_process_group"
    torch: SpecifierSet
    outcome: Tuple[str, ...]  # any of OUTCOMES
    where: Where
    message: Optional[re.Pattern] = None
    advice: Optional[str] = None
    source: Optional[str] = None
    observed: Tuple[Observation, ...] = ()
    cuda: Optional[SpecifierSet] = None  # over the CUDA version; cpu builds never match
    variants: Optional[Tuple[str, ...]] = None
    python: Optional[SpecifierSet] = None
    platform: Optional[Tuple[str, ...]] = None
    backend: Optional[Tuple[str, ...]] = None
    model: Optional[bool] = None  # true: only with --model; false: only the built-in model
    note: str = ""
    numpy: Optional[SpecifierSet] = None  # over the numpy the ranks import; none never matches
    # A combination torch does not support (this torch on this Python or NumPy): a match
    # is verdict ``unsupported``. Such an entry overlays the others for the same checks
    # (it may contradict them: it names a narrower environment) and is tried first.
    unsupported: bool = False
    # (("lightning", "DDPStrategy(timeout=...)"), ...): the advice in a framework's words
    framework_advice: Tuple[Tuple[str, str], ...] = ()

    @property
    def expects_pass(self):
        return self.outcome == ("passed",)

    @property
    def allows_pass(self):
        """Passing is fine: the entry expects it, or it lists passed among failures (the
        outcome depends on something the matrix cannot see, such as the user's model)."""
        return "passed" in self.outcome

    @property
    def expects_failure(self):
        return any(o in BAD_OUTCOMES for o in self.outcome)

    def matches_torch(self, version):
        return versions.torch_in(self.torch, version)

    def matches_build(self, variant):
        if self.variants is not None and variant not in self.variants:
            return False
        if self.cuda is not None:
            cuda = cuda_of(variant)
            if cuda is None or not self.cuda.contains(cuda, prereleases=True):
                return False
        return True

    def matches_python(self, python):
        if self.python is None:
            return True
        return bool(python) and self.python.contains(python, prereleases=True)

    def matches_platform(self, platform):
        return self.platform is None or platform in self.platform

    def matches_backend(self, backend):
        return self.backend is None or backend in self.backend

    def matches_model(self, model):
        return self.model is None or bool(model) == self.model

    def matches_numpy(self, numpy):
        if self.numpy is None:
            return True
        try:
            return bool(numpy) and self.numpy.contains(numpy, prereleases=True)
        except ValueError:  # an unparseable version string: no match
            return False

    def applies(self, target):
        return (self.matches_torch(target.torch) and self.matches_build(target.variant)
                and self.matches_python(target.python)
                and self.matches_platform(target.platform)
                and self.matches_backend(target.backend)
                and self.matches_model(target.model)
                and self.matches_numpy(getattr(target, "numpy", None)))

    def matches_message(self, text):
        return self.message is None or bool(self.message.search(text or ""))

    def conditions(self):
        """The conditions besides the check id, as the matrix file writes them."""
        out = {"torch": str(self.torch)}
        if self.cuda is not None:
            out["cuda"] = str(self.cuda)
        if self.variants is not None:
            out["variants"] = list(self.variants)
        if self.python is not None:
            out["python"] = str(self.python)
        if self.platform is not None:
            out["platform"] = list(self.platform)
        if self.backend is not None:
            out["backend"] = list(self.backend)
        if self.model is not None:
            out["model"] = self.model
        if self.numpy is not None:
            out["numpy"] = str(self.numpy)
        if self.unsupported:
            out["unsupported"] = True
        return out

    def observed_series(self):
        """The release series ('2.4') of the runs this entry cites, oldest first."""
        return sorted({versions.series(o.torch) for o in self.observed}, key=Version)

    def gaps(self, releases):
        """The release series in this entry's range that none of its runs observed: where
        the range is an assumption, not evidence (said as such by ``envcheck matrix``)."""
        seen = set(self.observed_series())
        return tuple(r.series for r in releases
                     if r.series not in seen and any(self.matches_torch(p) for p in r.patches))

    def to_dict(self):
        d = {"file": self.where.file, "entry": self.where.index, "line": self.where.line,
             "checks": list(self.checks), "outcome": list(self.outcome),
             "message": self.message.pattern if self.message else None,
             "advice": self.advice, "source": self.source,
             "observed": [dataclasses.asdict(o) for o in self.observed]}
        if self.framework_advice:
            d["framework_advice"] = dict(self.framework_advice)
        d.update(self.conditions())
        return d


@dataclasses.dataclass(frozen=True)
class MatrixFile:
    name: str  # relative name, the key --matrix overrides by
    path: str
    builtin: bool


@dataclasses.dataclass(frozen=True)
class Matrix:
    releases: Tuple[Release, ...]
    toolkits: Tuple[Toolkit, ...]
    expectations: Tuple[Expectation, ...]
    files: Tuple[MatrixFile, ...]
    # GPU generations' driver windows, cuDNN floors, wheel tags, GPU names (facts.py)
    node: object = None
    # how known failures read in a job's log (signatures.py), in file order
    signatures: tuple = ()

    def release(self, version):
        """The release a torch version belongs to (by major.minor), or None."""
        key = versions.series(version)
        return next((r for r in self.releases if r.series == key), None)

    def toolkit(self, cuda):
        return next((t for t in self.toolkits if t.version == cuda), None)

    def known_patches(self):
        return sorted((p for r in self.releases for p in r.patches), key=Version)

    def applicable(self, check_id, target):
        """The entries for this check that apply to ``target``, ``unsupported`` ones
        first (they name a narrower environment, and win)."""
        found = [e for e in self.expectations
                 if check_id in e.checks and target is not None and e.applies(target)]
        return sorted(found, key=lambda e: not e.unsupported)

    def between(self, check_id, target):
        """(entry, lower series, upper series) when no entry's range covers ``target`` but
        the nearest observed releases below and above it agree: both judged by entries
        for this check, in this environment, with the same outcome and message. A
        behaviour identical on both neighbours is judged as on them; None otherwise
        (then there is no data to judge by)."""
        if target is None:
            return None
        here = Version(versions.series(target.torch))
        points = []  # (series, entry): every run an applicable-but-for-torch entry cites
        for e in self.expectations:
            if check_id not in e.checks:
                continue
            shifted = [dataclasses.replace(target, torch=Version(s)) for s in
                       e.observed_series()]
            for t in shifted:
                if e.applies(t):
                    points.append((t.torch, e))
        below = [p for p in points if p[0] < here]
        above = [p for p in points if p[0] > here]
        if not below or not above or any(p[0] == here for p in points):
            return None
        lo = max(p[0] for p in below)
        hi = min(p[0] for p in above)
        lows = {e for v, e in below if v == lo}
        highs = {e for v, e in above if v == hi}

        def behaviour(e):
            return (e.outcome, e.message.pattern if e.message else None)

        kinds = {behaviour(e) for e in lows | highs}
        if len(kinds) != 1:
            return None
        entry = min(lows, key=lambda e: (e.where.file, e.where.index))
        return entry, "%d.%d" % lo.release[:2], "%d.%d" % hi.release[:2]

    def known_issues(self, target):
        """Expectations of a bad outcome that apply to this build, in file order."""
        return [e for e in self.expectations
                if not e.allows_pass and e.applies(target)]

    def describe(self):
        """What goes into ``report.matrix``: which files judged the report."""
        return {"files": [{"name": f.name, "path": f.path, "builtin": f.builtin}
                          for f in self.files],
                "expectations": len(self.expectations)}

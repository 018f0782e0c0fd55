"""``envcheck check``: will this torch wheel work on this node? Answered from the matrix.

Criteria, each ✓/✗ with the numbers: a wheel exists for this Python (and platform);
the driver meets the CUDA variant's floor; the driver's branch can run each GPU's
generation at all (gpus.toml); every GPU's compute capability is compiled in (or
reachable by same-major binary compatibility or PTX JIT, said as such); every GPU meets
the bundled cuDNN's own floor (cudnn.toml); glibc meets the wheel's floor (wheels.toml);
and the known distributed-training issues of that build. A "no" carries the fact's
source and a short reason (what ``envcheck summary`` groups nodes by); a "no" resting on
an unconfirmed fact is a warning. Pure functions over a ``Matrix`` and a ``node.Node``:
nothing here imports torch or prints.
"""

import dataclasses
from typing import Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..matrix import versions
from ..core.errors import UsageError
from . import pins as pin_mod, resolve as resolve_mod
from .pins import PYPI
from ..matrix.values import Target
from ..matrix.versions import sm_tuple

OK, FAIL, WARN, SKIP, UNKNOWN = "ok", "fail", "warn", "skip", "unknown"
INDEX_URL = "https://download.pytorch.org/whl/%s"


@dataclasses.dataclass(frozen=True)
class Criterion:
    id: str  # wheel, driver, gpu, glibc, known_issues
    status: str  # ok, fail, warn, skip, unknown
    message: str
    numbers: dict = dataclasses.field(default_factory=dict)
    unconfirmed: Tuple[str, ...] = ()  # matrix facts it rests on that are UNCONFIRMED
    source: str = ""  # the public source of the fact a "no" rests on
    short: str = ""  # a "no" in a few words, the same on every node it applies to


@dataclasses.dataclass(frozen=True)
class Build:
    torch: str  # "2.4.1"
    variant: str  # "cu124"
    default: bool  # the build `pip install torch==X` gets from PyPI

    @property
    def name(self):
        return "%s+%s" % (self.torch, self.variant)

    @property
    def pip(self):
        if self.default:
            return "pip install torch==%s" % self.torch
        return "pip install torch==%s --index-url %s" % (self.torch, INDEX_URL % self.variant)


@dataclasses.dataclass(frozen=True)
class Answer:
    build: Build
    criteria: Tuple[Criterion, ...]
    known_issues: tuple  # matrix Expectations
    notes: Tuple[str, ...] = ()

    @property
    def works(self):
        return not any(c.status == FAIL for c in self.criteria)

    @property
    def failed(self):
        return [c for c in self.criteria if c.status == FAIL]

    @property
    def cannot_judge(self):
        """Nothing fails, but a criterion the answer needs could not be judged."""
        return self.works and any(c.status == UNKNOWN for c in self.criteria)


def resolve(matrix, pin, cuda=None):
    """(release, Build, notes) for a Pin, as the newest release in range, whatever the
    node; UsageError for what the matrix does not know. ``pick`` resolves for a node."""
    release, build, notes, _ = pick(matrix, pin, None, cuda)
    return release, build, notes


def _wanted_variant(pin, cuda):
    variant = pin.variant
    if cuda is not None:
        try:
            wanted = versions.variant_for_cuda(cuda)
        except ValueError as exc:
            raise UsageError("--cuda: %s" % exc) from None
        if variant and variant != wanted:
            raise UsageError("%s asks for +%s but --cuda %s means %s"
                             % (pin.text, variant, cuda, wanted))
        variant = wanted
    return variant


def _indexes(pin, variant, cuda):
    """The indexes pip reads for this pin: a named build (+cu124, --cuda) comes from its
    variant's index; else the requirement's (file's) index URLs; else PyPI."""
    if variant and (cuda is not None or pin_mod.local_variant(pin.specifier)):
        return (variant,)
    return pin.indexes or ((variant,) if variant else (PYPI,))


def pick(matrix, pin, node, cuda=None):
    """(release, Build, notes, Resolution or None): the build pip would install for the
    pin on ``node`` (resolve.py), or, without a node or when no release of the matrix
    is in range, the build the pin names; UsageError for what the matrix does not know."""
    variant = _wanted_variant(pin, cuda)
    indexes = _indexes(pin, variant, cuda)
    resolution = resolve_mod.resolve(matrix, pin.specifier, indexes, node) \
        if node is not None else None
    if resolution is None:
        release, build, notes = _named(matrix, pin, variant)
        return release, build, notes, None
    chosen = resolution.chosen or resolution.newest
    build = Build(chosen.patch, chosen.variant, chosen.default)
    notes = []
    exact = pin.exact
    if exact and Version(exact) == Version(chosen.version.public) \
            and Version(exact).public != chosen.patch:
        notes.append("%s is torch %s, as pip reads it" % (pin.text, chosen.patch))
    several = len(resolve_mod.candidates(matrix, pin.specifier, indexes)) > 1
    if several and resolution.chosen is not None:
        notes.append("%s resolves to %s: the newest release in range with a wheel "
                     "for this node, as pip picks it" % (pin.text, chosen.version))
    if several:
        notes += [skip.text for skip in resolution.skipped]
    if resolution.chosen is not None and len(indexes) > 1:
        for index in indexes:
            other = resolve_mod.resolve(matrix, pin.specifier, (index,), node)
            if other is not None and other.chosen is not None \
                    and other.chosen.index != resolution.chosen.index:
                notes.append("%s's best, %s, loses to %s: pip takes the highest version of "
                             "all indexes (pin the range, or use --index-url)"
                             % (_index_name(index), other.chosen.version, chosen.version))
    if resolution.chosen is None:
        notes.append("pip finds no wheel of %s for this node (No matching distribution "
                     "found)%s" % (pin.text, "; judged: %s, the newest in range"
                                   % build.name if several else ""))
    elif not resolution.judged_tags and several:
        notes.append("the matrix knows Linux x86_64 wheels only: %s is the newest in "
                     "range, not necessarily what pip picks on %s %s"
                     % (build.name, node.system, node.machine))
    return chosen.release, build, notes, resolution


def _index_name(index):
    return "PyPI" if index == PYPI else "the %s index" % index


def _named(matrix, pin, variant):
    """The build a pin names when no candidate of the matrix is in its range: a nightly,
    a ROCm or unknown variant, or an error saying what the matrix knows."""
    notes = []
    exact = pin.exact
    if exact:
        version = versions.parse_version(exact)
    else:
        candidates = [Version(p) for p in matrix.known_patches()
                      if versions.torch_in(pin.specifier, p)]
        if not candidates:
            raise UsageError("no torch release the matrix knows satisfies %r (it knows %s)"
                             % (pin.text, _known_summary(matrix)))
        version = max(candidates)
        notes.append("%s resolves to %s, the newest release the matrix knows in that range"
                     % (pin.text, version))
    release = matrix.release(version)
    public = Version(version.public)
    if release is None:
        raise UsageError("torch %s is not in the matrix, which knows releases %s. If it "
                         "exists, add a [[release]] entry for %s (see docs/matrix.md: "
                         "'Adding a release'), in matrix/releases.toml or a file of your "
                         "own passed with --matrix DIR"
                         % (public, _known_summary(matrix), versions.series(public)))
    base = public.base_version if public.is_prerelease else str(public)
    # pip compares versions, not strings: ==2.4 is 2.4.0 (PEP 440 zero-padding).
    same = next((p for p in release.patches if Version(p) == Version(base)), None)
    if same and same != base:
        notes.append("%s is torch %s, as pip reads it" % (pin.text, same))
        public = Version(same) if not public.is_prerelease else public
        base = same
    if base not in release.patches:
        raise UsageError("torch %s is not in the matrix: of the %s series it knows %s. If "
                         "%s exists, add it to that release's patches (see docs/matrix.md: "
                         "'Adding a release')" % (public, release.series,
                                                  ", ".join(release.patches), base))
    if public.is_prerelease:
        notes.append("%s is a pre-release: judged by the facts of the %s release; nightly "
                     "wheels come from %s and may differ"
                     % (public, base, INDEX_URL % "nightly/VARIANT"))
    variant = variant or release.default_variant
    return release, Build(str(public), variant, variant == release.default_variant), notes


def _known_summary(matrix):
    series = [r.series for r in matrix.releases]
    return "%s … %s" % (series[0], series[-1]) if len(series) > 2 else ", ".join(series)


def _range(items):
    items = list(items)
    return "%s–%s" % (items[0], items[-1]) if len(items) > 2 else ", ".join(items)


def _wheel(release, build, variant, node):
    pythons = release.python_for(build.torch)
    numbers = {"python": node.python, "wheel_pythons": list(pythons),
               "variants": [v.name for v in release.variants]}
    if variant is None and build.variant.startswith("rocm"):
        if node.gpus:
            # A definite no: ROCm builds drive AMD GPUs through HIP; they cannot use
            # an NVIDIA GPU, whatever else the matrix does not know about them.
            return Criterion("wheel", FAIL, "%s is a ROCm build, for AMD GPUs; this node has "
                             "NVIDIA GPUs (%s): pick a CUDA build"
                             % (build.name, ", ".join(sorted({g.sm for g in node.gpus}))),
                             numbers, short="%s is a ROCm build, GPUs are NVIDIA"
                             % build.name)
        return Criterion("wheel", UNKNOWN, "the matrix does not cover ROCm builds (%s), and "
                         "this node shows no NVIDIA GPU to rule it out" % build.variant,
                         numbers, short="ROCm build %s: not in the matrix" % build.name)
    if variant is None:
        return Criterion("wheel", FAIL, "torch %s has no %s build (the matrix knows %s)"
                         % (build.torch, build.variant,
                            ", ".join(v.name for v in release.variants)), numbers,
                         short="torch %s has no %s build" % (build.torch, build.variant))
    unconfirmed = ("variant exists",) if variant.is_unconfirmed("exists") else ()
    own = release.patch_facts(build.torch)
    source = own.source if own else ""
    if own and own.unconfirmed:
        unconfirmed += ("%s's wheel tags" % build.torch,)
    if node.python not in pythons:
        return Criterion("wheel", WARN if own and own.unconfirmed else FAIL,
                         "torch %s has wheels for Python %s; this node runs %s"
                         % (build.torch, ", ".join(pythons), node.python), numbers,
                         unconfirmed, source, short="no Python %s wheel of torch %s (%s)"
                         % (node.python, build.torch,
                            _range(p for p in pythons if "t" not in p)))
    if not node.is_linux_x86_64:
        return Criterion("wheel", UNKNOWN, "the matrix covers Linux x86_64 wheels; this node "
                         "is %s %s" % (node.system, node.machine), numbers, unconfirmed,
                         short="not Linux x86_64: %s %s" % (node.system, node.machine))
    abi = resolve_mod.abi_tag(node.python)
    return Criterion("wheel", OK, "%s has a %s wheel (Python %s)"
                     % (build.name, abi, _range(p for p in pythons if "t" not in p)),
                     numbers, unconfirmed)


def _driver(matrix, build, variant, node):
    if variant is None:
        return Criterion("driver", SKIP, "no such build")
    if not variant.cuda:
        return Criterion("driver", SKIP, "%s build: no NVIDIA driver needed" % build.variant)
    toolkit = matrix.toolkit(variant.cuda)
    floor = toolkit.compat_driver
    full = toolkit.min_driver
    numbers = {"needs": floor, "cuda": variant.cuda, "full_feature_driver": full,
               "found": node.driver}
    if not node.driver and "gpus" in node.given:
        return Criterion("driver", UNKNOWN, "driver unknown: add --driver VERSION to check "
                         "it against %s's floor (%s)" % (build.variant, floor), numbers,
                         short="driver unknown")
    if not node.driver:
        return Criterion("driver", WARN if not node.gpus else FAIL,
                         "no NVIDIA driver found (%s): the %s build would run on CPU only"
                         % (node.notes[0] if node.notes else "nvidia-smi shows none",
                            build.variant), numbers, short="no NVIDIA driver")
    found = versions.driver_tuple(node.driver)
    major = variant.cuda.split(".")[0]
    if found < versions.driver_tuple(floor):
        return Criterion("driver", FAIL, "%s needs driver ≥ %s (CUDA %s.x minor-version "
                         "compatibility), found %s" % (build.variant, floor, major, node.driver),
                         numbers, short="driver %s < %s for %s"
                         % (node.driver, floor, build.variant))
    unconfirmed = ("CUDA %s driver" % variant.cuda,) if "min_driver" in toolkit.unconfirmed else ()
    if full and found < versions.driver_tuple(full):
        return Criterion("driver", OK, "%s needs driver ≥ %s, found %s (below %s, CUDA %s's "
                         "own driver: runs under minor-version compatibility; PTX newer than "
                         "the driver cannot be JIT-compiled)"
                         % (build.variant, floor, node.driver, full, variant.cuda),
                         numbers, unconfirmed)
    return Criterion("driver", OK, "%s needs driver ≥ %s, found %s"
                     % (build.variant, floor, node.driver), numbers, unconfirmed)


def reach(sm, archs, ptx):
    """How a GPU runs this build: ('compiled'|'binary'|'ptx'|None, the arch used)."""
    if sm in archs:
        return "compiled", sm
    major, minor = sm_tuple(sm)
    # Same-major binary compatibility: an sm_XY cubin runs on sm_XZ for Z >= Y; the
    # arch-specific "a"/"f" targets are excluded, they do not carry forward.
    same = [a for a in archs if a[-1].isdigit() and sm_tuple(a)[0] == major
            and sm_tuple(a)[1] <= minor]
    if same:
        return "binary", max(same, key=sm_tuple)
    jit = [p for p in ptx if p[-1].isdigit() and sm_tuple(p) <= (major, minor)]
    if jit:
        return "ptx", max(jit, key=sm_tuple)
    return None, None


def _gpus(build, variant, node):
    if not node.gpus:
        return Criterion("gpu", SKIP, "no GPU to check")
    by_sm = {}
    for g in node.gpus:
        by_sm.setdefault(g.sm, []).append(g)
    numbers = {"gpus": sorted(by_sm), "archs": [], "ptx": []}
    if variant is None:
        return Criterion("gpu", SKIP, "no such build", numbers)
    if not variant.cuda:
        return Criterion("gpu", WARN, "the %s build cannot use the GPUs here (%s): pick a "
                         "CUDA build" % (build.variant, ", ".join(sorted(by_sm))), numbers)
    archs = sorted(variant.archs, key=sm_tuple)
    numbers.update(archs=archs, ptx=list(variant.ptx))
    unconfirmed = tuple(f for f in ("archs", "ptx") if variant.is_unconfirmed(f))
    parts, status, missing = [], OK, []
    for sm in sorted(by_sm, key=sm_tuple):
        gpus = by_sm[sm]
        who = "GPU %s" % ",".join(str(g.index) for g in gpus)
        how, used = reach(sm, variant.archs, variant.ptx)
        if how == "compiled":
            parts.append("%s (%s) is compiled in" % (sm, who))
        elif how == "binary":
            parts.append("%s (%s) runs the %s code (same-major binary compatibility)"
                         % (sm, who, used))
        elif how == "ptx":
            parts.append("%s (%s) is reachable only by PTX JIT from %s (slow first start; "
                         "needs a driver that knows that PTX)" % (sm, who, used))
        else:
            status = FAIL
            parts.append("%s (%s) is not in %s's arch list and no PTX reaches it"
                         % (sm, who, build.name))
            missing.append(sm)
    text = "; ".join(parts) + " — %s has %s%s" % (
        build.name, " ".join(archs) or "no arch list",
        " +PTX " + " ".join(variant.ptx) if variant.ptx else "")
    return Criterion("gpu", status, text, numbers, unconfirmed,
                     short="%s not compiled in %s" % (", ".join(missing), build.name)
                     if missing else "")


def _glibc(matrix, release, variant, node):
    floor = release.glibc_for(variant) if variant else release.glibc
    tag_name = resolve_mod.wheel_platform(release, variant)
    tag = matrix.node.wheel_tag(tag_name) if matrix.node and tag_name else None
    numbers = {"needs": floor, "found": node.glibc, "wheel_tag": tag_name}
    if node.system != "Linux" and "glibc" not in node.given:
        return Criterion("glibc", SKIP, "not Linux: no glibc floor", numbers)
    why = "manylinux"
    source = ""
    if tag is not None:
        source = tag.source
        if versions.driver_tuple(floor) > versions.driver_tuple(tag.glibc):
            why = "%s wheel, but its binaries need %s" % (tag.tag, floor)
            source += "; torch %s in releases.toml: %s" % (release.series, release.note)
        else:
            why = "%s wheel" % tag.tag
    if not node.glibc:
        return Criterion("glibc", FAIL, "no glibc found (musl?): manylinux wheels need glibc "
                         "≥ %s" % floor, numbers, source=source, short="no glibc (musl?)")
    if versions.driver_tuple(node.glibc) < versions.driver_tuple(floor):
        return Criterion("glibc", FAIL, "needs glibc ≥ %s (%s), found %s: pip finds no "
                         "wheel for this node" % (floor, why, node.glibc), numbers,
                         source=source, short="glibc %s < %s (%s)"
                         % (node.glibc, floor, tag_name or "manylinux"))
    return Criterion("glibc", OK, "needs glibc ≥ %s (%s), found %s"
                     % (floor, why, node.glibc), numbers)


def _by_sm(node):
    by_sm = {}
    for g in node.gpus:
        by_sm.setdefault(g.sm, []).append(g)
    return {sm: by_sm[sm] for sm in sorted(by_sm, key=sm_tuple)}


def _who(gpus):
    return "GPU %s" % ",".join(str(g.index) for g in gpus)


def _gpu_driver(matrix, variant, node):
    """Can this driver run these GPUs at all? Each generation has a window of driver
    branches (gpus.toml): a K80 needs R470 or older, an RTX 5090 R570 or newer."""
    if variant is None or not variant.cuda:
        return Criterion("gpu_driver", SKIP, "no CUDA build: the driver does not matter")
    if not node.gpus or not node.driver:
        return Criterion("gpu_driver", SKIP, "no GPU and driver to check together")
    branch = versions.driver_tuple(node.driver)[0]
    status, parts, sources, unconfirmed, shorts = OK, [], [], [], []
    numbers = {"driver": node.driver, "branch": branch, "windows": {}}
    for sm, gpus in _by_sm(node).items():
        gen = matrix.node.generation(sm) if matrix.node else None
        if gen is None:
            parts.append("%s (%s): no driver window in the matrix" % (sm, _who(gpus)))
            continue
        numbers["windows"][sm] = [gen.first_branch, gen.last_branch]
        below = gen.first_branch and branch < gen.first_branch
        above = gen.last_branch and branch > gen.last_branch
        if below or above:
            field = "first_branch" if below else "last_branch"
            weak = field in gen.unconfirmed
            if weak:  # a "no" resting on an unconfirmed bound only warns
                status = WARN if status == OK else status
                unconfirmed.append("%s %s" % (gen.name, field))
            else:
                status = FAIL
            sources.append(gen.source)
            if below:
                parts.append("%s (%s, %s) needs driver branch R%d or newer, found %s"
                             % (sm, _who(gpus), gen.name, gen.first_branch, node.driver))
                shorts.append("driver %s cannot run %s (%s needs R%d+)"
                              % (node.driver, sm, gen.name, gen.first_branch))
            else:
                shorts.append("driver %s cannot run %s (%s: up to R%d)"
                              % (node.driver, sm, gen.name, gen.last_branch))
                parts.append("%s (%s, %s) is not run by drivers after R%d (%s's last "
                             "branch), found %s: install a %d.x driver"
                             % (sm, _who(gpus), gen.name, gen.last_branch, gen.name,
                                node.driver, gen.last_branch))
        else:
            parts.append("R%d runs %s (%s: %s)" % (branch, sm, gen.name, _window(gen)))
    for g in node.gpus:
        product = matrix.node.product_floor(g.name) if matrix.node else None
        if product is None or product.product in numbers.setdefault("products", {}):
            continue
        numbers["products"][product.product] = product.min_driver
        if versions.driver_tuple(node.driver) >= versions.driver_tuple(product.min_driver):
            parts.append("%s needs driver ≥ %s, found %s"
                         % (product.product, product.min_driver, node.driver))
            continue
        if product.unconfirmed:
            status = WARN if status == OK else status
            unconfirmed.append("%s driver floor" % product.product)
        else:
            status = FAIL
        sources.append(product.source)
        parts.append("%s (%s) needs driver ≥ %s (a floor NVIDIA documents for this "
                     "product, inside R%d), found %s"
                     % (product.product, _who([x for x in node.gpus if x.name == g.name]),
                        product.min_driver, versions.driver_tuple(product.min_driver)[0],
                        node.driver))
        shorts.append("driver %s < %s for %s"
                      % (node.driver, product.min_driver, product.product))
    return Criterion("gpu_driver", status, "; ".join(parts), numbers, tuple(unconfirmed),
                     " | ".join(dict.fromkeys(sources)), "; ".join(shorts))


def _window(gen):
    if gen.first_branch and gen.last_branch:
        return "R%d–R%d" % (gen.first_branch, gen.last_branch)
    if gen.first_branch:
        return "R%d and later" % gen.first_branch
    return "up to R%d" % gen.last_branch if gen.last_branch else "any driver"


def _cudnn(matrix, build, variant, node):
    """cuDNN's own floor: a wheel may compile sm_37 and still bundle a cuDNN that
    refuses it (cudnn.toml)."""
    if variant is None or not variant.cuda:
        return Criterion("cudnn", SKIP, "no CUDA build: no cuDNN")
    if not node.gpus:
        return Criterion("cudnn", SKIP, "no GPU to check")
    floor = matrix.node.cudnn_floor(variant.cudnn) if matrix.node else None
    if not variant.cudnn or floor is None:
        return Criterion("cudnn", SKIP, "the matrix knows no cuDNN floor for %s's cuDNN (%s)"
                         % (build.name, variant.cudnn or "unknown"))
    numbers = {"cudnn": variant.cudnn, "min_sm": floor.min_sm}
    unconfirmed = ("cuDNN %s floor" % variant.cudnn,) if floor.unconfirmed else ()
    if variant.is_unconfirmed("cudnn"):
        unconfirmed += ("%s's cuDNN version" % build.name,)
    below = [(sm, gpus) for sm, gpus in _by_sm(node).items()
             if sm_tuple(sm) < sm_tuple(floor.min_sm)]
    if below:
        return Criterion("cudnn", WARN if floor.unconfirmed else FAIL,
                         "cuDNN %s (in %s) needs compute capability ≥ %s; %s below it: "
                         "every cuDNN call (convolutions, RNNs) fails"
                         % (variant.cudnn, build.name, floor.min_sm,
                            ", ".join("%s (%s) is" % (sm, _who(g)) for sm, g in below)),
                         numbers, unconfirmed, floor.source,
                         short="cuDNN %s needs %s+, GPU %s" % (
                             variant.cudnn, floor.min_sm, ", ".join(sm for sm, _ in below)))
    return Criterion("cudnn", OK, "cuDNN %s supports %s (needs ≥ %s)"
                     % (variant.cudnn, ", ".join(_by_sm(node)), floor.min_sm), numbers,
                     unconfirmed)


def _issues(matrix, build, node):
    # The backend envcheck would pick here: nccl when a CUDA build meets GPUs.
    backend = "nccl" if node.gpus and build.variant.startswith("cu") else "gloo"
    target = Target(Version(build.torch), build.variant, node.python.rstrip("t"),
                    node.platform, backend, model=False)
    issues = matrix.known_issues(target)
    if not issues:
        return Criterion("known_issues", OK, "no known distributed-training issue of %s in "
                         "the matrix" % build.name), ()
    checks = sorted({c for e in issues for c in e.checks})
    return Criterion("known_issues", WARN, "%d check%s known to fail with %s (see below): %s"
                     % (len(checks), "" if len(checks) == 1 else "s", build.name,
                        ", ".join(checks)), {"checks": checks}), tuple(issues)


def evaluate(matrix, release, build, node, notes=()):
    variant = release.variant(build.variant)
    issues_criterion, issues = _issues(matrix, build, node)
    criteria = (_wheel(release, build, variant, node), _driver(matrix, build, variant, node),
                _gpu_driver(matrix, variant, node), _gpus(build, variant, node),
                _cudnn(matrix, build, variant, node), _glibc(matrix, release, variant, node),
                issues_criterion)
    return Answer(build, criteria, issues, tuple(notes))


def _candidate_variants(release, cpu_first=False):
    def order(v):
        if v.name == "cpu" and cpu_first:
            return (-1, 0)
        if v.name == release.default_variant:
            return (0, 0)
        if v.cuda:
            return (1, -Version(v.cuda).release[0] * 100 - Version(v.cuda).release[1])
        return (2, 0)
    # On a node without GPUs the CPU build is the one to install, even though the
    # matrix could not re-verify download.pytorch.org/whl/cpu for every release (it
    # says so: [UNCONFIRMED ...]); elsewhere only builds known to exist are offered.
    return [v for v in sorted(release.variants, key=order)
            if not v.is_unconfirmed("exists") or (cpu_first and v.name == "cpu")]


def python_releases(matrix, python):
    """The release series that publish wheels for this Python ('3.13'), oldest first."""
    return [r.series for r in matrix.releases if python in r.python]


def cpu_build(release, build, node):
    """The CPU build to install instead of a CUDA one on a node with no NVIDIA GPU (the
    CUDA wheels pull gigabytes of CUDA libraries that would never run); None otherwise."""
    if node.gpus or "gpus" in node.given or build.variant == "cpu" \
            or not build.variant.startswith("cu") or release.variant("cpu") is None:
        return None
    return Build(build.torch, "cpu", False)


def working_builds(matrix, release, patch, node, exclude=None):
    """Builds of one torch version that pass every criterion here, best first."""
    out = []
    for v in _candidate_variants(release, cpu_first=not node.gpus):
        if v.name == exclude or (node.gpus and not v.cuda):
            continue
        build = Build(patch, v.name, v.name == release.default_variant)
        answer = evaluate(matrix, release, build, node)
        if answer.works:
            out.append(answer)
    return out


def suggest(matrix, node, limit=5):
    """The newest release series' best working build each, newest first. Each build is
    the patch pip would install from that build's index (``==SERIES.*`` through
    resolve.py: a 3.13t node gets 2.12.0, whose cp313t wheels 2.12.1 lacks)."""
    out = []
    for release in sorted(matrix.releases, key=lambda r: Version(r.series), reverse=True):
        spec = SpecifierSet("==%s.*" % release.series)
        for v in _candidate_variants(release, cpu_first=not node.gpus):
            if node.gpus and not v.cuda:
                continue
            index = PYPI if v.name == release.default_variant else v.name
            found = resolve_mod.resolve(matrix, spec, (index,), node)
            if found is None or found.chosen is None:
                continue
            answer = evaluate(matrix, release, Build(found.chosen.patch, v.name,
                                                     index == PYPI), node)
            if answer.works:
                out.append(answer)
                break
        if len(out) >= limit:
            break
    return out

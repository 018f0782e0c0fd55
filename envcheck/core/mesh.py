"""The job's own mesh, as a layout: its degrees, the device mesh they build, its groups.

Large jobs do not train on the world: they train on a device mesh (data-parallel shards
and replicas, tensor, pipeline, context and expert parallel groups), and their failures
live in those groups. ``envcheck run --mesh dp_shard=2,tp=2`` (or ``--mesh-config FILE``)
reads the layout the job will use, refuses a product that does not match the world size
before any rank starts, and hands the ``mesh`` probe (probes/mesh.py) the layout.

The dimension names and their order are TorchTitan's ParallelDims
(github.com/pytorch/torchtitan, torchtitan/distributed/parallel_dims.py at 73bb964):
``build_mesh`` makes ``init_device_mesh(device, dims, mesh_dim_names=names)`` from
``["pp", "dp_replicate", "dp_shard", "cp", "tp"]`` in that order (outermost first: tp
innermost, so that a TP group is consecutive ranks, inside a node), skipping degree-1
dims; ``_validate`` resolves ``dp_shard = -1`` to ``WORLD_SIZE // (dp_replicate * cp *
tp * pp)`` and asserts ``dp_replicate(a) * dp_shard(b) * cp(c) * tp(d) * pp(e) !=
WORLD_SIZE(n)``, the numbers this module's refusal gives too. Expert parallelism is its
dp2ep layout (``_build_mesh_with_ep``, ETP = TP): EP borrows all of cp and part of
dp_shard, so the mesh is ``["pp", "dp_replicate", "dp_shard_mod_ep", "dp_shard_in_ep",
"cp", "tp"]`` (dp_shard_mod_ep kept even at 1), ``ep`` is ``dp_shard_in_ep`` and ``cp``
flattened, ``dp_shard`` is ``dp_shard_mod_ep`` and ``dp_shard_in_ep``; it asserts
``ep % cp == 0 and (dp_shard * cp) % ep == 0``, and ep is not in the product.

Inputs (``read``): ``name=N,...`` with those names (``dp`` is ``dp_shard``, as FSDP);
Megatron-style arguments (``--tensor-model-parallel-size`` and its pipeline, context and
expert kin; data-parallel is the rest, as Megatron's); a TorchTitan job config's
``[parallelism]`` (TOML); a DeepSpeed config (JSON: ``tensor_parallel.autotp_size``,
``sequence_parallel_size``); an Accelerate config (YAML: ``parallelism_config``'s
``parallelism_config_*_size`` keys, ``megatron_lm_config``'s ``megatron_lm_tp_degree``
and ``megatron_lm_pp_degree``).

stdlib only: the supervisor checks the layout, the ranks build from it.
"""

import dataclasses
import itertools
import json
import os
import re
import shlex
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import UsageError

# Every parallel dimension, in the order the probe checks them (TorchTitan's names).
NAMES = ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep")
# The mesh TorchTitan builds, outermost first (parallel_dims.py build_mesh).
BUILD_ORDER = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
ALIASES = {"dp": "dp_shard", "fsdp": "dp_shard", "ddp": "dp_replicate"}
# The dimensions whose groups should stay inside a node: their collectives run every
# layer (TP's all-gather, EP's all-to-all), and across the network they are ~10x slower.
INSIDE_NODE = ("tp", "ep")

# A TorchTitan [parallelism] key -> its dimension (torchtitan/config/job_config.py).
TORCHTITAN_KEYS = {
    "data_parallel_replicate_degree": "dp_replicate",
    "data_parallel_shard_degree": "dp_shard",
    "tensor_parallel_degree": "tp",
    "pipeline_parallel_degree": "pp",
    "context_parallel_degree": "cp",
    "expert_parallel_degree": "ep",
}
# Megatron-LM's arguments (megatron/training/arguments.py) -> dimension.
MEGATRON_ARGS = {
    "--tensor-model-parallel-size": "tp",
    "--pipeline-model-parallel-size": "pp",
    "--context-parallel-size": "cp",
    "--expert-model-parallel-size": "ep",
}
# Accelerate's config file keys (accelerate config; ParallelismConfig and its
# Megatron-LM plugin) -> dimension.
ACCELERATE_KEYS = {
    "parallelism_config_dp_replicate_size": "dp_replicate",
    "parallelism_config_dp_shard_size": "dp_shard",
    "parallelism_config_tp_size": "tp",
    "parallelism_config_cp_size": "cp",
    "megatron_lm_tp_degree": "tp",
    "megatron_lm_pp_degree": "pp",
}


@dataclasses.dataclass(frozen=True)
class Layout:
    """A job's layout: a degree per dimension (dp_shard resolved), the world size, the
    mesh's dimension order (outermost first; None: TorchTitan's), and where it was read."""

    degrees: Tuple[Tuple[str, int], ...]
    world_size: int
    source: str
    order: Optional[Tuple[str, ...]] = None

    def degree(self, name: str) -> int:
        return dict(self.degrees)[name]

    @property
    def active(self) -> List[str]:
        """The dimensions of degree above 1, in the order the probe checks them."""
        return [n for n in NAMES if self.degree(n) > 1]

    def shape(self) -> str:
        """'pp=2 dp_shard=2 tp=2' (degree-1 dims left out; 'world=N' when all are 1)."""
        parts = ["%s=%d" % (n, self.degree(n)) for n in self.active]
        return " ".join(parts) or "dp_shard=1"

    def mesh_dims(self, order: Optional[Sequence[str]] = None) -> List[Tuple[str, int]]:
        """(name, size) of the mesh init_device_mesh builds, outermost first."""
        d = dict(self.degrees)
        if d["ep"] > 1:
            # TorchTitan's dp2ep (ETP = TP): ep = dp_shard_in_ep * cp.
            sizes = {"pp": d["pp"], "dp_replicate": d["dp_replicate"],
                     "dp_shard_mod_ep": d["dp_shard"] * d["cp"] // d["ep"],
                     "dp_shard_in_ep": d["ep"] // d["cp"], "cp": d["cp"], "tp": d["tp"]}
            base = ["pp", "dp_replicate", "dp_shard_mod_ep", "dp_shard_in_ep", "cp", "tp"]
            names = [n for n in base if sizes[n] > 1 or n == "dp_shard_mod_ep"]
        else:
            sizes = d
            names = [n for n in BUILD_ORDER if d[n] > 1]
        order = order if order is not None else self.order
        if order:
            given = [_mesh_name(n, names) for n in order]
            names = [n for n in given if n] + [n for n in names if n not in given]
        return [(n, sizes[n]) for n in names]

    def members(self, dim: str, dims: Sequence[Tuple[str, int]]) -> Tuple[str, ...]:
        """The mesh dimensions a parallel dimension is made of (flattened, mesh order)."""
        names = [n for n, _ in dims]
        if "dp_shard_mod_ep" in names:
            parts = {"dp_shard": ("dp_shard_mod_ep", "dp_shard_in_ep"),
                     "ep": ("dp_shard_in_ep", "cp")}.get(dim, (dim,))
        else:
            parts = (dim,)
        return tuple(n for n in names if n in parts)

    def groups(self, dim: str, order: Optional[Sequence[str]] = None) -> List[List[int]]:
        """Every group of ``dim``: lists of global ranks, as the mesh makes them (row-major
        over the mesh, the dimension's own coordinates varying within a group)."""
        dims = self.mesh_dims(order)
        return mesh_groups(dims, self.members(dim, dims))

    def to_dict(self) -> dict:
        return {"degrees": dict(self.degrees), "world_size": self.world_size,
                "source": self.source, "order": list(self.order) if self.order else None}

    @classmethod
    def from_dict(cls, data: dict) -> "Layout":
        degrees = data["degrees"]
        return cls(tuple((n, int(degrees[n])) for n in NAMES), int(data["world_size"]),
                   str(data.get("source") or ""),
                   tuple(data["order"]) if data.get("order") else None)


def _mesh_name(name: str, names: Sequence[str]) -> Optional[str]:
    if name in names:
        return name
    if name == "dp_shard" and "dp_shard_mod_ep" in names:
        return "dp_shard_mod_ep"
    if name == "ep" and "dp_shard_in_ep" in names:
        return "dp_shard_in_ep"
    return None


def mesh_groups(dims: Sequence[Tuple[str, int]], members: Sequence[str]) -> List[List[int]]:
    """The groups of the mesh ``dims`` along ``members`` (flattened in mesh order)."""
    names = [n for n, _ in dims]
    sizes = [s for _, s in dims]
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    inside = [names.index(m) for m in members]
    outside = [i for i in range(len(names)) if i not in inside]
    groups = []
    for fixed in itertools.product(*[range(sizes[i]) for i in outside]):
        base = sum(c * strides[i] for c, i in zip(fixed, outside))
        groups.append([base + sum(c * strides[i] for c, i in zip(var, inside))
                       for var in itertools.product(*[range(sizes[i]) for i in inside])])
    return groups


def hosts_of(group: Sequence[int], hosts: Sequence[str]) -> List[str]:
    """The hosts a group spans, in rank order."""
    return list(dict.fromkeys(hosts[r] for r in group))


def better_order(layout: Layout, dim: str, hosts: Sequence[str]) -> Optional[List[str]]:
    """A mesh order (outermost first) that keeps every group of ``dim`` inside one host
    and no other inside-node dimension worse off, TorchTitan's own first; None when no
    order does (a group larger than a host)."""
    names = [n for n, _ in layout.mesh_dims()]
    default = [n for n, _ in layout.mesh_dims(order=())]
    candidates = [default] + [list(p) for p in itertools.permutations(default)
                              if list(p) != default]
    now = {d: _split(layout, d, hosts, names) for d in INSIDE_NODE if layout.degree(d) > 1}
    for order in candidates:
        if order == names:
            continue
        if _split(layout, dim, hosts, order):
            continue
        if all(_split(layout, d, hosts, order) <= n for d, n in now.items()):
            return order
    return None


def _split(layout, dim, hosts, order):
    """How many groups of ``dim`` span more than one host, laid in ``order``."""
    return sum(len(hosts_of(g, hosts)) > 1 for g in layout.groups(dim, order))


# ---- reading a layout -----------------------------------------------------------------

def validate(degrees: Dict[str, int], world_size: int, source: str,
             order: Optional[Sequence[str]] = None) -> Layout:
    """The layout ``degrees`` make on ``world_size`` ranks; a one-line UsageError with
    every degree and the world size, as TorchTitan's ParallelDims._validate words it,
    when they do not make one."""
    d = {n: 1 for n in NAMES}
    d["dp_shard"] = -1
    d.update(degrees)
    for name in NAMES:
        if d[name] == 0 or d[name] < -1 or (d[name] == -1 and name != "dp_shard"):
            raise UsageError("%s: %s=%d: a parallel degree is 1 or more (only dp_shard "
                             "may be -1: the rest of the world)" % (source, name, d[name]))
    rest = d["dp_replicate"] * d["cp"] * d["tp"] * d["pp"]
    if d["dp_shard"] == -1:
        d["dp_shard"] = max(world_size // rest, 1)
    product = rest * d["dp_shard"]
    numbers = ("dp_replicate(%d) * dp_shard(%d) * cp(%d) * tp(%d) * pp(%d)" % (
        d["dp_replicate"], d["dp_shard"], d["cp"], d["tp"], d["pp"]))
    if product != world_size:
        raise UsageError(
            "%s: invalid parallel dims: %s = %d != WORLD_SIZE(%d)%s: give degrees whose "
            "product is %d (dp_shard=-1 takes the rest), or run %d ranks" % (
                source, numbers, product, world_size,
                " (ep(%d) is carved from dp_shard * cp)" % d["ep"] if d["ep"] > 1 else "",
                world_size, product))
    if d["ep"] > 1 and (d["ep"] % d["cp"] or (d["dp_shard"] * d["cp"]) % d["ep"]):
        raise UsageError(
            "%s: invalid expert parallel degree: ep(%d) must be a multiple of cp(%d) and "
            "divide dp_shard(%d) * cp(%d) (TorchTitan's dp2ep: EP borrows all of cp and "
            "part of dp_shard); %s = WORLD_SIZE(%d)" % (
                source, d["ep"], d["cp"], d["dp_shard"], d["cp"], numbers, world_size))
    layout = Layout(tuple((n, d[n]) for n in NAMES), world_size, source)
    if order:
        layout = _with_order(layout, order, source)
    return layout


def _with_order(layout: Layout, order: Sequence[str], source: str) -> Layout:
    wanted = [ALIASES.get(n, n) for n in order]
    built = [n for n, _ in layout.mesh_dims()]
    known = [n for n in wanted if _mesh_name(n, built)]
    unknown = [n for n in wanted if n not in NAMES]
    if unknown or len(set(wanted)) != len(wanted):
        raise UsageError("--mesh-order %s: name each dimension once, from %s" % (
            ",".join(order), ", ".join(NAMES)))
    return dataclasses.replace(layout, order=tuple(known), source="%s, order %s" % (
        source, ",".join(wanted)))


def parse_spec(text: str) -> Dict[str, int]:
    """``dp_shard=2,tp=2`` (or Megatron-style arguments) -> degrees; UsageError quoting
    the bad part."""
    if text.strip().startswith("--"):
        found = parse_megatron(text, "--mesh")
        if not found:
            raise UsageError("--mesh %r: no Megatron parallel size in it (%s)" % (
                text, ", ".join(MEGATRON_ARGS)))
        return found
    degrees: Dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = ALIASES.get(name.strip(), name.strip())
        if not sep or name not in NAMES or not re.fullmatch(r"-?\d+", value.strip()):
            raise UsageError("--mesh %r: write NAME=DEGREE,... with NAME one of %s (and "
                             "dp for dp_shard), e.g. --mesh dp_shard=2,tp=2" % (
                                 text, ", ".join(NAMES)))
        if name in degrees:
            raise UsageError("--mesh %r: %s given twice" % (text, name))
        degrees[name] = int(value)
    if not degrees:
        raise UsageError("--mesh %r: no degree given, e.g. --mesh dp_shard=2,tp=2" % text)
    return degrees


def parse_megatron(text: str, where: str) -> Dict[str, int]:
    """Megatron-LM's parallel-size arguments in ``text`` (a command line, a script)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise UsageError("%s: cannot read its arguments: %s" % (where, exc)) from None
    degrees: Dict[str, int] = {}
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag not in MEGATRON_ARGS:
            continue
        value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
        if not value.isdigit():
            raise UsageError("%s: %s %r: a degree is a whole number" % (where, flag, value))
        degrees[MEGATRON_ARGS[flag]] = int(value)
    return degrees


def read_config(path: str) -> Tuple[Dict[str, int], str]:
    """(degrees, what it is) from a TorchTitan TOML, a DeepSpeed JSON, an Accelerate
    YAML, or a text with Megatron-style arguments."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("--mesh-config %s: cannot read it: %s" % (
            path, getattr(exc, "strerror", None) or exc)) from None
    ext = os.path.splitext(path)[1].lower()
    where = "--mesh-config %s" % path
    if ext == ".toml":
        return _torchtitan(text, where), "TorchTitan config %s" % os.path.basename(path)
    if ext == ".json":
        return _deepspeed(text, where), "DeepSpeed config %s" % os.path.basename(path)
    if ext in (".yaml", ".yml"):
        return _accelerate(text, where), "Accelerate config %s" % os.path.basename(path)
    degrees = parse_megatron(text, where)
    if not degrees:
        raise UsageError("%s: no layout found: give a TorchTitan .toml, a DeepSpeed .json, "
                         "an Accelerate .yaml, or a file with Megatron's "
                         "--tensor-model-parallel-size and kin" % where)
    return degrees, "Megatron arguments in %s" % os.path.basename(path)


def _torchtitan(text, where):
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # pragma: no cover - Python < 3.11 (core is stdlib only: no tomli)
        raise UsageError("%s: reading a TOML file needs Python 3.11 or later (tomllib); "
                         "give the degrees with --mesh instead" % where) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError("%s: not TOML: %s" % (where, exc)) from None
    section = data.get("parallelism")
    if not isinstance(section, dict):
        raise UsageError("%s: no [parallelism] section (TorchTitan's job config keeps the "
                         "degrees there)" % where)
    degrees = {}
    for key, name in TORCHTITAN_KEYS.items():
        if key in section:
            value = section[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError("%s: [parallelism] %s = %r: a whole number" % (
                    where, key, value))
            degrees[name] = value
    return degrees


def _deepspeed(text, where):
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError("%s: not JSON: %s" % (where, exc)) from None
    if not isinstance(data, dict):
        raise UsageError("%s: a DeepSpeed config is a JSON object" % where)
    degrees = {}
    tp = data.get("tensor_parallel")
    if isinstance(tp, dict) and "autotp_size" in tp:
        degrees["tp"] = _whole(tp["autotp_size"], where, "tensor_parallel.autotp_size")
    if "sequence_parallel_size" in data:
        degrees["cp"] = _whole(data["sequence_parallel_size"], where,
                               "sequence_parallel_size")
    if not degrees:
        raise UsageError("%s: states no parallel degree (tensor_parallel.autotp_size, "
                         "sequence_parallel_size); give --mesh instead" % where)
    return degrees


def _accelerate(text, where):
    degrees = {}
    for line in text.splitlines():
        key, sep, value = line.split("#")[0].strip().partition(":")
        if sep and key.strip() in ACCELERATE_KEYS and value.strip():
            degrees[ACCELERATE_KEYS[key.strip()]] = _whole(value.strip(), where, key.strip())
    if not degrees:
        raise UsageError("%s: states no parallel degree (parallelism_config_*_size, "
                         "megatron_lm_tp_degree); give --mesh instead" % where)
    return degrees


def _whole(value, where, key):
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(str(value))
    except ValueError:
        raise UsageError("%s: %s = %r: a whole number" % (where, key, value)) from None


def with_probe(specs, known, skipped=()):
    """The chosen probes with the opt-in ``mesh`` probe added (a layout asks for it),
    in the suite's order, unless ``--skip mesh``."""
    if PROBE in skipped or any(s.name == PROBE for s in specs):
        return list(specs)
    names = {s.name for s in specs} | {PROBE}
    return [s for s in known if s.name in names]


PROBE = "mesh"


def read(spec: Optional[str], config: Optional[str], order: Optional[str],
         world_size: int) -> Optional[Layout]:
    """The layout ``--mesh``, ``--mesh-config`` and ``--mesh-order`` give for
    ``world_size`` ranks, checked; None when neither is given."""
    if spec and config:
        raise UsageError("--mesh and --mesh-config: give one layout, not two")
    if order and not (spec or config):
        raise UsageError("--mesh-order %s: give the layout too (--mesh or --mesh-config)"
                         % order)
    if not (spec or config):
        return None
    if spec:
        degrees, source = parse_spec(spec), "--mesh %s" % spec
    else:
        degrees, source = read_config(str(config))
    if spec and spec.strip().startswith("--"):
        degrees.setdefault("dp_shard", -1)
    names = [n.strip() for n in order.split(",")] if order else None
    return validate(degrees, world_size, source, names)

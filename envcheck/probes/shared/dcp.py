"""torch.distributed.checkpoint (DCP) as the installed torch spells it.

DCP appeared in torch 2.0 with ``save_state_dict``/``load_state_dict`` and a
FileSystemWriter/Reader; ``dcp.save``/``dcp.load`` came in 2.2 taking a storage
writer/reader, ``checkpoint_id`` in 2.3, then ``async_save`` and ``format_utils``. The
adapter picks each call by the installed function's signature, never by which names
exist (2.2 has ``dcp.save`` without ``checkpoint_id``). Probes call this adapter and
report which spelling ran, so a report says what the user's own code can use there.
"""

import inspect
import warnings


class DcpMissing(Exception):
    """This torch lacks the DCP feature; the message names what is missing."""


class DcpBroken(Exception):
    """DCP is there but does not import on this Python (torch 1.13's
    torch.distributed._shard.checkpoint on Python 3.11: a dataclass with a mutable
    default). A failure to report, unlike DcpMissing: the user's DCP code breaks too."""


class DcpFailed(Exception):
    """A DCP call failed on some rank. torch raises ``CheckpointException``, a
    ``BaseException`` whose message names only the ranks ("CheckpointException
    ranks:dict_keys([1])"); this one leads with each rank's own error."""


def _failure(exc, how):
    failures = getattr(exc, "failures", None)
    if not isinstance(failures, dict) or not failures:
        return None
    by_error = {}  # one line per distinct error, naming every rank that raised it
    for rank, err in sorted(failures.items(), key=lambda kv: str(kv[0])):
        inner = err[0] if isinstance(err, tuple) and err else err  # (exc, stack summary)
        first = (str(inner).strip().splitlines() or [""])[0][:200]
        by_error.setdefault("%s: %s" % (type(inner).__name__, first), []).append(str(rank))
    parts = ["rank%s %s: %s" % ("s" * (len(ranks) > 1), ",".join(ranks), error)
             for error, ranks in by_error.items()]
    failed = DcpFailed("%s raised %s on %d rank(s): %s" % (
        how, type(exc).__name__, len(failures), "; ".join(parts)))
    failed.by_rank = failures  # as torch's failures: which ranks' own part failed
    return failed


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _accepts(fn, name):
    """Whether ``fn`` takes the keyword ``name``, read from its signature (torch's DCP
    decorators keep ``__wrapped__``, which inspect.signature follows)."""
    return fn is not None and name in _params(fn)


class _Call:
    """One of save/load as this torch spells it: ``dcp.save(state, checkpoint_id=path)``
    (2.3+), ``dcp.save(state, storage_writer=FileSystemWriter(path))`` (2.2: the new name,
    but no checkpoint_id yet), or ``dcp.save_state_dict(state, FileSystemWriter(path))``
    (2.0, 2.1, and 1.13's torch.distributed._shard.checkpoint). Chosen by what the
    installed function accepts, not by which names exist."""

    def __init__(self, dcp, prefix, modern, legacy, io_class, io_arg):
        self.io = getattr(dcp, io_class, None)
        fn = getattr(dcp, modern, None)
        if _accepts(fn, "checkpoint_id"):
            self.fn, self.how, self.kind = fn, "%s.%s" % (prefix, modern), "checkpoint_id"
        elif _accepts(fn, io_arg) and self.io is not None:
            self.fn, self.kind = fn, "io_keyword"
            self.how = "%s.%s(%s=%s)" % (prefix, modern, io_arg, io_class)
        elif legacy and getattr(dcp, legacy, None) is not None and self.io is not None:
            self.fn, self.kind = getattr(dcp, legacy), "io_positional"
            self.how = "%s.%s + %s" % (prefix, legacy, io_class)
        else:
            raise DcpMissing("%s.%s takes neither checkpoint_id nor %s%s"
                             % (prefix, modern, io_arg, ", and there is no %s with %s"
                                % (legacy, io_class) if legacy else ""))
        self.io_arg = io_arg
        self.group_ok = _accepts(self.fn, "process_group")

    def __call__(self, state, path, group=None, **extra):
        try:
            return self._call(state, path, group, **extra)
        except BaseException as exc:
            failed = _failure(exc, self.how.split("(")[0].split(" + ")[0])
            if failed is None:
                raise
            raise failed from exc

    def _call(self, state, path, group, **extra):
        kwargs = dict(extra)
        if group is not None or self.group_ok:
            kwargs["process_group"] = group
        if self.kind == "checkpoint_id":
            return self.fn(state, checkpoint_id=path, **kwargs)
        if self.kind == "io_keyword":
            kwargs[self.io_arg] = self.io(path)
            return self.fn(state, **kwargs)
        return self.fn(state, self.io(path), **kwargs)


class Dcp:
    def __init__(self, torch, module=None, prefix="dcp"):
        """``module``: the DCP module to drive (tests hand in one shaped like an older
        torch's); by default the installed torch's."""
        self.version = torch.__version__
        if module is not None:
            self._setup(module, prefix)
            return
        import importlib

        try:
            dcp = importlib.import_module("torch.distributed.checkpoint")
        except Exception as exc:
            # torch 1.13 had it as torch.distributed._shard.checkpoint, same legacy API.
            try:
                dcp = importlib.import_module("torch.distributed._shard.checkpoint")
                prefix = "torch.distributed._shard.checkpoint"
            except Exception as old:
                if not isinstance(old, ImportError) or \
                        getattr(old, "name", None) not in (None, "torch.distributed._shard",
                                                           "torch.distributed._shard.checkpoint"):
                    raise DcpBroken(
                        "torch %s's DCP (torch.distributed._shard.checkpoint) exists but "
                        "does not import: %s: %s" % (self.version, type(old).__name__,
                                                    str(old).strip().splitlines()[0][:200]))
                from ...worker.hazards import advice_for

                hint = advice_for(old)
                raise DcpMissing(
                    "torch %s has no torch.distributed.checkpoint (%s: %s), and its "
                    "predecessor torch.distributed._shard.checkpoint does not import "
                    "(%s: %s)" % (self.version, type(exc).__name__, exc,
                                  type(old).__name__, str(old)[:160])
                    + ("; %s" % hint if hint else ""))
        self._setup(dcp, prefix)

    def _setup(self, dcp, prefix):
        self.dcp = dcp
        self._save = _Call(dcp, prefix, "save", "save_state_dict", "FileSystemWriter",
                           "storage_writer")
        self._load = _Call(dcp, prefix, "load", "load_state_dict", "FileSystemReader",
                           "storage_reader")
        self.modern = self._save.kind == "checkpoint_id"
        self.api = "%s/%s" % (self._save.how, self._load.how)

    def save(self, state, path, group=None):
        return self._save(state, path, group)

    def load(self, state, path, group=None):
        return self._load(state, path, group)

    def load_alone(self, state, path):
        """Load in this process only, with no collective: what ``dcp.load`` does in a
        process that has no process group. Returns the call used."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # load_state_dict: deprecated for dcp.load
            if _accepts(self._load.fn, "no_dist"):
                self._load(state, path, no_dist=True)
                return "%s(no_dist=True)" % self._load.how.split("(")[0].split(" + ")[0]
            legacy = getattr(self.dcp, "load_state_dict", None)
            if _accepts(legacy, "no_dist") and self._load.io is not None:
                legacy(state, self._load.io(path), no_dist=True)
                return "dcp.load_state_dict(no_dist=True)"
        raise DcpMissing("torch %s: neither dcp.load nor dcp.load_state_dict takes "
                         "no_dist, so a checkpoint cannot be loaded without a process "
                         "group" % self.version)

    def to_torch_save(self, path, out):
        """Convert a DCP checkpoint into one torch.save file (format_utils)."""
        try:
            from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
        except ImportError as exc:
            raise DcpMissing("torch %s has no torch.distributed.checkpoint.format_utils."
                             "dcp_to_torch_save (%s)" % (self.version, exc))
        dcp_to_torch_save(path, out)
        return "format_utils.dcp_to_torch_save"

    @property
    def has_async_save(self):
        return getattr(self.dcp, "async_save", None) is not None

    def async_save(self, state, path, group=None):
        """Start an async save; returns something with ``.result()``."""
        if not self.has_async_save:
            raise DcpMissing("torch %s has no torch.distributed.checkpoint.async_save"
                             % self.version)
        call = _Call(self.dcp, "dcp", "async_save", None, "FileSystemWriter",
                     "storage_writer")
        started = call(state, path, group)
        # Newer torch may answer an AsyncSaveResponse holding the futures instead.
        if hasattr(started, "result"):
            return started
        return getattr(started, "upload_completion", None) or \
            getattr(started, "staging_completion")


def sharding_api(torch):
    """(distribute_tensor, Shard, init_device_mesh, where) or a DcpMissing reason."""
    try:
        from torch.distributed.tensor import Shard, distribute_tensor
        where = "torch.distributed.tensor"
    except ImportError:
        try:
            from torch.distributed._tensor import Shard, distribute_tensor
            where = "torch.distributed._tensor"
        except Exception as exc:
            raise DcpMissing("torch %s has no DTensor (%s)" % (torch.__version__, exc))
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        try:
            from torch.distributed._tensor import init_device_mesh
        except ImportError as exc:
            raise DcpMissing("torch %s has no init_device_mesh (%s)"
                             % (torch.__version__, exc))
    return distribute_tensor, Shard, init_device_mesh, where

"""torch.distributed.checkpoint (DCP) as the installed torch spells it.

DCP appeared in torch 2.0 with ``save_state_dict``/``load_state_dict`` and a
FileSystemWriter/Reader; ``dcp.save``/``dcp.load`` (with ``checkpoint_id``) came later,
then ``async_save`` and ``format_utils``. Probes call this adapter and report which
spelling ran, so a report says what the user's own code can use on that torch.
"""

import inspect
import warnings


class DcpMissing(Exception):
    """This torch lacks the DCP feature; the message names what is missing."""


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


class Dcp:
    def __init__(self, torch):
        self.version = torch.__version__
        import importlib

        prefix = "dcp"
        try:
            dcp = importlib.import_module("torch.distributed.checkpoint")
        except Exception as exc:
            # torch 1.13 had it as torch.distributed._shard.checkpoint, same legacy API.
            try:
                dcp = importlib.import_module("torch.distributed._shard.checkpoint")
                prefix = "torch.distributed._shard.checkpoint"
            except Exception as old:
                from .diagnose import advice_for

                hint = advice_for(old)
                raise DcpMissing(
                    "torch %s has no torch.distributed.checkpoint (%s: %s), and its "
                    "predecessor torch.distributed._shard.checkpoint does not import "
                    "(%s: %s)" % (self.version, type(exc).__name__, exc,
                                  type(old).__name__, str(old)[:160])
                    + ("; %s" % hint if hint else ""))
        self.dcp = dcp
        self.modern = hasattr(dcp, "save") and hasattr(dcp, "load")
        self.api = ("%s.save/%s.load" % (prefix, prefix) if self.modern else
                    "%s.save_state_dict/%s.load_state_dict + FileSystemWriter/Reader"
                    % (prefix, prefix))

    def save(self, state, path, group=None):
        if self.modern:
            return self.dcp.save(state, checkpoint_id=path, process_group=group)
        return self.dcp.save_state_dict(state, self.dcp.FileSystemWriter(path),
                                        process_group=group)

    def load(self, state, path, group=None):
        if self.modern:
            return self.dcp.load(state, checkpoint_id=path, process_group=group)
        return self.dcp.load_state_dict(state, self.dcp.FileSystemReader(path),
                                        process_group=group)

    def load_alone(self, state, path):
        """Load in this process only, with no collective: what ``dcp.load`` does in a
        process that has no process group. Returns the call used."""
        if self.modern and "no_dist" in _params(self.dcp.load):
            self.dcp.load(state, checkpoint_id=path, no_dist=True)
            return "dcp.load(no_dist=True)"
        legacy = getattr(self.dcp, "load_state_dict", None)
        if legacy is not None and "no_dist" in _params(legacy):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in favour of dcp.load
                legacy(state, self.dcp.FileSystemReader(path), no_dist=True)
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

    def async_save(self, state, path, group=None):
        """Start an async save; returns something with ``.result()``."""
        fn = getattr(self.dcp, "async_save", None)
        if fn is None:
            raise DcpMissing("torch %s has no torch.distributed.checkpoint.async_save"
                             % self.version)
        started = fn(state, checkpoint_id=path, process_group=group)
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

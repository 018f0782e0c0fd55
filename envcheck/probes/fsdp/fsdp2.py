"""FSDP2 (``fully_shard``) and the distributed state-dict API, as the installed torch spells them.

FSDP2 arrived in stages: ``fully_shard`` in ``torch.distributed._composable.fsdp``
(2.3 to 2.5: a prototype in 2.3, found and observed there by the sweep), then public as ``torch.distributed.fsdp.fully_shard`` from 2.6;
``init_device_mesh`` in ``torch.distributed.device_mesh`` (2.2);
``get_state_dict``/``set_state_dict`` in ``torch.distributed.checkpoint.state_dict``
(2.2); ``CPUOffloadPolicy`` next to ``fully_shard``. The probe asks this adapter, which
names what it found (so a report says what the user's own code can import on that torch)
or raises ``FsdpMissing`` saying what is missing.
"""

import importlib


class FsdpMissing(Exception):
    """This torch lacks an FSDP2 piece; the message names it."""


def _first(candidates, version, what):
    errors = []
    for module, name in candidates:
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            errors.append("%s.%s: %s" % (module, name, str(exc).splitlines()[0][:120]
                                         if str(exc) else type(exc).__name__))
            continue
        return obj, module
    raise FsdpMissing("torch %s has no %s (tried %s)" % (version, what, "; ".join(errors)))


class Fsdp:
    def __init__(self, torch):
        version = torch.__version__
        self.version = version
        self.fully_shard, self.where = _first(
            [("torch.distributed.fsdp", "fully_shard"),
             ("torch.distributed._composable.fsdp", "fully_shard")],
            version, "FSDP2 fully_shard (it is torch.distributed._composable.fsdp in 2.3 to "
                     "2.5, torch.distributed.fsdp from 2.6)")
        self.init_device_mesh, _ = _first(
            [("torch.distributed.device_mesh", "init_device_mesh")], version,
            "init_device_mesh (DeviceMesh)")
        sd = "torch.distributed.checkpoint.state_dict"
        self.get_state_dict, _ = _first([(sd, "get_state_dict")], version, "get_state_dict")
        self.set_state_dict, _ = _first([(sd, "set_state_dict")], version, "set_state_dict")
        self.StateDictOptions, _ = _first([(sd, "StateDictOptions")], version,
                                          "StateDictOptions")
        try:
            self.CPUOffloadPolicy = getattr(importlib.import_module(self.where),
                                            "CPUOffloadPolicy")
        except AttributeError:
            self.CPUOffloadPolicy = None
        self.api = "%s.fully_shard, %s.get_state_dict/set_state_dict" % (self.where, sd)

    def mesh(self, device_type, shape, names=None):
        kwargs = {"mesh_dim_names": names} if names else {}
        return self.init_device_mesh(device_type, tuple(shape), **kwargs)

    def shard(self, module, mesh, offload=False):
        kwargs = {"mesh": mesh}
        if offload:
            if self.CPUOffloadPolicy is None:
                raise FsdpMissing("torch %s has no CPUOffloadPolicy next to fully_shard in %s"
                                  % (self.version, self.where))
            kwargs["offload_policy"] = self.CPUOffloadPolicy()
        return self.fully_shard(module, **kwargs)

    def full_state(self, model, optimizer):
        """{"model", "optimizer"}: whole tensors (every rank gets them), keyed by FQN."""
        opts = self.StateDictOptions(full_state_dict=True, cpu_offload=False)
        msd, osd = self.get_state_dict(model, optimizer, options=opts)
        return {"model": msd, "optimizer": osd}

    def sharded_state(self, model, optimizer):
        msd, osd = self.get_state_dict(model, optimizer)
        return {"model": msd, "optimizer": osd}

    def full_model_state(self, model):
        """The EMA-safe copy of a sharded model's weights: whole tensors on every rank
        (a collective), loadable into an unsharded copy of the model."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        return get_model_state_dict(
            model, options=self.StateDictOptions(full_state_dict=True))

    def load_state(self, model, optimizer, state):
        self.set_state_dict(model, optimizer, model_state_dict=state["model"],
                            optim_state_dict=state["optimizer"])


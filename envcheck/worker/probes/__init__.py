"""Built-in probes, one per module, or per package when a probe has helpers (the probe
in its ``__init__``). A probe is a function ``probe_NAME(ctx)``
(underscores in NAME become dashes in the probe's name); its docstring's first line is
the summary ``envcheck probes`` prints. Probe modules import torch inside the probe
function, never at module level, so the supervisor can list them without torch.
"""

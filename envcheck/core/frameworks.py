"""The training frameworks whose own API envcheck's advice can name.

A user of Lightning does not call ``init_process_group`` (the strategy does), so advice
that says "set timeout= in init_process_group" sends them looking for a call they never
wrote. The ranks report which of these their interpreter has installed (without
importing them: ``worker.environment``); a matrix entry's ``framework_advice`` says the
same fix in that framework's words, keyed by these names.
"""

import collections

Framework = collections.namedtuple("Framework", "name modules distributions")

FRAMEWORKS = {
    # The unified ``lightning`` package holds both lightning.pytorch and lightning.fabric;
    # the older standalone packages still install under their own names.
    "lightning": Framework("Lightning", ("lightning", "pytorch_lightning", "lightning_fabric"),
                           ("lightning", "pytorch-lightning", "lightning-fabric")),
    "accelerate": Framework("Accelerate", ("accelerate",), ("accelerate",)),
    "deepspeed": Framework("DeepSpeed", ("deepspeed",), ("deepspeed",)),
}

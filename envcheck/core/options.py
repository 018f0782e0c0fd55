"""The options ``envcheck run`` and launcher mode share, declared once.

``envcheck run`` (cli.py, typer) and ``python -m envcheck.worker.launched`` (argparse:
the ranks have no typer) both build these from this table: the same flags, metavars,
defaults and help, so that an option means the same thing under torchrun as under
``envcheck run``. tests/test_options.py checks both parsers against it.

stdlib only: the ranks read it.
"""

import dataclasses
from typing import Any, Optional, Tuple

from .errors import UsageError
from .plan import BACKENDS, DEFAULT_TIMEOUT, MAX_TIMEOUT, MIN_TIMEOUT
from .repeat import FOR_HELP, REPEAT_HELP


@dataclasses.dataclass(frozen=True)
class Option:
    dest: str  # the parameter's name in both parsers
    flags: Tuple[str, ...]
    help: str
    kind: str = "str"  # str, float, list (repeatable), flag
    default: Any = None
    metavar: Optional[str] = None
    # Left out of ``envcheck run --help`` (one screen), shown by --help-all.
    advanced: bool = False

    @property
    def argparse_kwargs(self) -> dict:
        """What ``argparse.ArgumentParser.add_argument`` takes for it."""
        kwargs: dict = {"dest": self.dest, "help": self.help.replace("%", "%%")}
        if self.kind == "flag":
            kwargs.update(action="store_true")
            return kwargs
        kwargs["metavar"] = self.metavar
        if self.kind == "list":
            kwargs.update(action="append", default=[])
        else:
            kwargs.update(default=self.default, type=float if self.kind == "float" else str)
        return kwargs


SHARED = (
    Option("probe", ("--probe", "-p"), kind="list", metavar="NAME",
           help="Run only this probe (repeatable) [default: all but the opt-in fsdp]."),
    Option("skip", ("--skip",), kind="list", metavar="NAME",
           help="Do not run this probe (repeatable)."),
    Option("timeout", ("--timeout",), kind="float", default=DEFAULT_TIMEOUT,
           metavar="SECONDS",
           help="Per probe (and for init_process_group and the final gather): past it, "
                "the probe is a hang and its stacks are collected."),
    Option("backend", ("--backend",), default="auto", metavar="|".join(BACKENDS),
           help="auto (nccl when every rank has a GPU, else gloo), gloo or nccl."),
    Option("startup_timeout", ("--startup-timeout",), kind="float", metavar="SECONDS",
           advanced=True,
           help="For starting the ranks and importing torch [default: the larger of "
                "--timeout and 120 s: a cold shared filesystem can take minutes]."),
    Option("probe_path", ("--probe-path",), kind="list", metavar="FILE.py", advanced=True,
           help="Load custom probes (def probe_NAME(ctx)) from this file (repeatable)."),
    Option("min_busbw", ("--min-busbw",), metavar="GB/S", advanced=True,
           help="Fail a host whose send/recv bus bandwidth (GB/s, nccl-tests' busbw) is "
                "below 90 % of this, as nccl-tests' NCCL_TESTS_MIN_BW does (the bandwidth "
                "probe; on one host, each rank) [default: judged only against the other "
                "hosts]."),
    Option("mesh", ("--mesh",), metavar="NAME=N,...", advanced=True,
           help="Check the job's device mesh: pp, dp_replicate, dp_shard, cp, tp, ep "
                "degrees (dp_shard=2,tp=2; docs/mesh.md)."),
    Option("mesh_config", ("--mesh-config",), metavar="FILE", advanced=True,
           help="Check the device mesh a config states: a TorchTitan job config (.toml), "
                "a DeepSpeed (.json) or Accelerate (.yaml) config, or a file with "
                "Megatron's arguments."),
    Option("mesh_order", ("--mesh-order",), metavar="NAME,...", advanced=True,
           help="The mesh's dimension order, outermost first, as the job's "
                "init_device_mesh has it [default: TorchTitan's pp,dp_replicate,dp_shard,"
                "cp,tp]."),
    Option("repeat", ("--repeat",), metavar="N", help=REPEAT_HELP),
    Option("duration", ("--for",), metavar="DURATION", advanced=True, help=FOR_HELP),
    Option("json_path", ("--json",), metavar="PATH",
           help="Also write the JSON report here (atomically)."),
    Option("junit_path", ("--junit",), metavar="PATH",
           help="Also write JUnit XML here (atomically): a testcase per check, for CI test "
                "tabs."),
    Option("verbose", ("--verbose", "-v"), kind="flag", default=False,
           help="A row per check with its detail, and every piece of advice with its "
                "source [default: the answer, what needs action, a line per known issue]."),
)

BY_DEST = {o.dest: o for o in SHARED}


def timeouts(**given: Optional[float]) -> None:
    """``--timeout`` and ``--startup-timeout`` (by dest) checked: at least MIN_TIMEOUT
    (less is a hang before anything starts), at most MAX_TIMEOUT; else a UsageError."""
    for dest, value in given.items():
        if value is not None and not MIN_TIMEOUT <= value <= MAX_TIMEOUT:
            raise UsageError("%s %g: must be at least %g s (less is a hang before anything "
                             "starts) and at most %d (a day)"
                             % (BY_DEST[dest].flags[0], value, MIN_TIMEOUT, MAX_TIMEOUT))


def backend(value: str) -> str:
    """``--backend`` checked: one of ``plan.BACKENDS``, else a UsageError."""
    if value not in BACKENDS:
        raise UsageError("--backend %r: choose one of %s" % (value, ", ".join(BACKENDS)))
    return value

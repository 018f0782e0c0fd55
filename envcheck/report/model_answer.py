"""What the user's model (``--model``) can and cannot do, read off the checks of one run.

A person who runs ``envcheck run --model pkg.mod:build`` asks one thing: will *my* model
survive what my training loop does to it. The checks that answer it are spread over four
probes (serialization, checkpoint, fsdp, frameworks), and a torch pitfall the model
really hits reads like any other known issue among them. Here they are gathered into a
line per capability — deepcopy, pickle, state_dict round trip, DDP wrap, FSDP2 shard,
DCP, the framework's wrapper — each with what the model did, the attributes that
stopped a copy (``data.blocked_by``, found by pickling every attribute in the model's
tree: ``probes/shared/copies.blockers``), and what that does to a training loop.

The remedies printed for a model's failure are the ones this same run tried on this
model (``tried here: works``), or are marked ``untested``; one that was tried and failed
is said to fail too, never advised. ``settle`` gives every check that saw the same fact
(a copy of the model stopped by the same attributes) one verdict and one advice.

Supervisor side: the report only, no torch.
"""

from ..core.outcomes import Outcome

WORKS, FAILS, UNCHECKED = "works", "fails", "not checked"

# (key, label, checks that decide it, what a training loop does that then fails,
#  how to get it checked when no check ran). The first check is the one whose detail
# a passing line quotes.
CAPABILITIES = (
    ("build", "build",
     ("serialization.model", "checkpoint.model"),
     "the model does not build, or its forward fails, in every rank", "-p serialization"),
    ("deepcopy", "deepcopy",
     ("serialization.deepcopy_ddp_module", "serialization.deepcopy_ddp"),
     "ema = copy.deepcopy(model) raises at start-up", "-p serialization"),
    ("pickle", "pickle",
     ("serialization.pickle_ddp",),
     "pickling the module (torch.save(model), a DataLoader worker or "
     "mp.spawn argument holding it) raises", "-p serialization"),
    ("state_dict", "state_dict",
     ("serialization.fresh_load_state_dict", "checkpoint.save_load"),
     "a fresh build loaded with model.state_dict() is not the same model "
     "(the EMA and resume fix)", "-p serialization"),
    ("ddp", "DDP wrap",
     ("serialization.ddp_wrap",),
     "DistributedDataParallel(model) raises", "-p serialization"),
    # fsdp.deepcopy is not the model's: FSDP2 refuses deepcopy of every sharded model (a
    # torch pitfall, listed as such), and its EMA remedy is fsdp.ema_copy's.
    ("fsdp", "FSDP2 shard",
     ("fsdp.model", "fsdp.train_step"),
     "fully_shard or the first sharded training step fails", "-p fsdp"),
    ("dcp", "DCP",
     ("checkpoint.dcp_save_load", "checkpoint.reshard_load", "fsdp.save_load",
      "fsdp.reshard_grow", "fsdp.reshard_shrink"),
     "saving or loading its distributed checkpoint fails", "-p checkpoint"),
    ("framework", "framework",
     ("frameworks.lightning_setup", "frameworks.lightning_deepcopy",
      "frameworks.lightning_save_load", "frameworks.lightning_own_launcher",
      "frameworks.accelerate_prepare", "frameworks.accelerate_deepcopy",
      "frameworks.accelerate_save_load"),
     "the framework's wrapper fails with it", "-p frameworks"),
)

# Checks a copy of the user's model fails in when an attribute cannot be pickled: one
# fact, judged once (``settle``), by the serialization check that copies the plain module.
COPY_CHECKS = ("serialization.deepcopy_ddp_module", "serialization.deepcopy_ddp",
               "serialization.pickle_ddp", "frameworks.lightning_deepcopy",
               "frameworks.accelerate_deepcopy", "fsdp.deepcopy")
JUDGE_OF_COPIES = ("serialization.deepcopy_ddp_module", "serialization.pickle_ddp",
                   "serialization.deepcopy_ddp")

# What to do instead of a failing copy, each with the check that tries it on the model
# in the same run (None: envcheck cannot try it).
REMEDIES = (
    ("fresh", "build the copy fresh and load the weights: ema = build_model(); "
              "ema.load_state_dict(model.state_dict())",
     "serialization.fresh_load_state_dict"),
    ("plain", "deepcopy the plain module, not its wrapper: ema = copy.deepcopy(ddp.module) "
              "(Fabric: copy before fabric.setup; Accelerate: accelerator.unwrap_model)",
     "serialization.deepcopy_ddp_module"),
    ("weights", "save the weights, not the module: torch.save(model.state_dict(), path)",
     "checkpoint.save_load"),
    ("full_tensors", "under FSDP2, load full tensors into a plain copy: "
                     "get_model_state_dict(model, options=StateDictOptions("
                     "full_state_dict=True))",
     "fsdp.ema_copy"),
    ("lookup", "keep the group out of the module: look it up where it is used (a module "
               "level get_sp_group()) instead of storing it on a layer", None),
)
# Which remedies answer which failing capability, in the order they are offered.
ANSWERS = {"deepcopy": ("fresh", "plain", "lookup"), "pickle": ("weights", "fresh", "lookup"),
           "framework": ("fresh", "plain", "lookup")}


# Each check as the operation a training script does.
DOES = {
    "serialization.model": "the factory in every rank",
    "checkpoint.model": "again for checkpoints",
    "serialization.deepcopy_ddp_module": "copy.deepcopy(model)",
    "serialization.deepcopy_ddp": "deepcopy of the DDP wrapper",
    "serialization.pickle_ddp": "pickle round trip",
    "serialization.fresh_load_state_dict": "fresh build + load_state_dict",
    "checkpoint.save_load": "torch.save/torch.load",
    "serialization.ddp_wrap": "DistributedDataParallel(model)",
    "fsdp.model": "fully_shard",
    "fsdp.train_step": "a sharded training step",
    "checkpoint.dcp_save_load": "dcp.save/dcp.load",
    "checkpoint.reshard_load": "a load at another world size",
    "fsdp.save_load": "FSDP2's state dict through DCP",
    "fsdp.reshard_grow": "resume on one more rank",
    "fsdp.reshard_shrink": "resume on one rank",
    "frameworks.lightning_setup": "fabric.setup",
    "frameworks.lightning_deepcopy": "deepcopy after fabric.setup",
    "frameworks.lightning_save_load": "fabric.save/fabric.load",
    "frameworks.lightning_own_launcher": "Fabric's own launcher (--framework lightning)",
    "frameworks.accelerate_prepare": "accelerator.prepare",
    "frameworks.accelerate_deepcopy": "deepcopy after accelerator.prepare",
    "frameworks.accelerate_save_load": "accelerator.save_state/load_state",
}
NO_FRAMEWORK = ("no Lightning or Accelerate in the ranks' interpreter (--framework lightning "
                "or accelerate makes their checks run, or fail)")


def spec(report):
    """The --model spec ('mymodels.stdit:build_model'), or None."""
    model = ((report.plan or {}).get("options") or {}).get("model")
    return model.get("spec") if isinstance(model, dict) else None


def _root_data(check):
    if check.root_rank is None:
        return {}
    data = ((check.ranks or {}).get(str(check.root_rank)) or {}).get("data")
    return data if isinstance(data, dict) else {}


def _passed_data(check):
    """A passed check's data (every rank the same: any rank's)."""
    for entry in (check.ranks or {}).values():
        if isinstance(entry, dict) and isinstance(entry.get("data"), dict):
            return entry["data"]
    return {}


def blocked_by(check):
    """['blocks.0.sp_group (ProcessGroup)', ...]: what stopped this copy, or []."""
    found = _root_data(check).get("blocked_by")
    return list(found) if isinstance(found, list) else []


def _by_id(report):
    return {c.id: c for c in report.checks}


def _bad(check):
    return Outcome(check.outcome).is_bad


def capability_lines(report):
    """[{key, label, status, checks, blocked_by, detail, in_training, not_run}] for a
    --model run; [] without --model. ``status``: works, fails, or not checked (``detail``
    says why, or which probe to add)."""
    if not spec(report):
        return []
    checks = _by_id(report)
    probes = set((report.plan or {}).get("probes") or ())
    out = []
    for key, label, ids, in_training, ask in CAPABILITIES:
        present = [checks[i] for i in ids if i in checks]
        ran = [c for c in present if c.outcome != Outcome.SKIPPED.value]
        failed = [c for c in ran if _bad(c)]
        line = {"key": key, "label": label, "checks": [c.id for c in ran],
                "blocked_by": [], "in_training": None, "not_run": _not_run(present)}
        if failed:
            first = failed[0]
            line["blocked_by"] = next((b for b in map(blocked_by, failed) if b), [])
            if key == "framework":  # which of the framework's steps
                in_training = "%s fail%s" % (" and ".join(DOES.get(c.id, c.check) for c in failed),
                                             "s" if len(failed) == 1 else "")
            line.update(status=FAILS, in_training=in_training, checks=[c.id for c in failed],
                        detail=_failure_text(first))
        elif ran:
            line.update(status=WORKS, detail=_passed_detail(ran, present))
        elif key == "framework" and present and all(
                c.outcome == Outcome.SKIPPED.value and "not installed" in (c.detail or "")
                for c in present):
            line.update(status=UNCHECKED, detail=NO_FRAMEWORK)
        else:
            skipped = [c for c in present if c.detail]
            if skipped:
                why = " ".join(skipped[0].detail.split())
            elif ids[0].split(".")[0] not in probes:
                why = "add %s" % ask
            else:
                why = "not run"
            line.update(status=UNCHECKED, detail=why)
        out.append(line)
    return out


def _failure_text(check):
    """What happened, whole: the detail is cut for a table cell; the error's message
    (a failed check's own words) is not."""
    detail = " ".join((check.detail or "").split())
    message = " ".join(((check.error or {}).get("message") or "").split())
    if message and (not detail or detail.endswith("…")):
        return message
    return detail or check.outcome


def _passed_detail(ran, present):
    """What a working line rests on: the checks that passed, and any of its parts left
    unchecked ('reshard: not checked')."""
    text = ", ".join(DOES.get(c.id, c.check) for c in ran)
    sharded = next((_root_data(c).get("sharded") or _passed_data(c).get("sharded")
                    for c in ran if c.id == "fsdp.train_step"), None)
    if sharded:  # the policy it was sharded by
        text += " (%s)" % sharded
    return text


def _not_run(present):
    """["Fabric's own launcher (--framework lightning)"]: the parts of a line that ran
    in part but were skipped though their package is there, so that what was not tested
    is said (a Fabric model's copy fails only under Fabric's own launcher)."""
    if all(c.outcome == Outcome.SKIPPED.value for c in present):
        return []  # the whole line was not checked: its detail says why
    return [DOES.get(c.id, c.check) for c in present if c.outcome == Outcome.SKIPPED.value
            and "not installed" not in (c.detail or "")]


def remedies(report, capability):
    """[{text, status, check}] for a failing capability: status 'tried here: works',
    'tried here: fails too' or 'untested'."""
    checks = _by_id(report)
    wanted = ANSWERS.get(capability["key"], ())
    found = []
    for key, text, verified_by in REMEDIES:
        if key not in wanted:
            continue
        if key == "lookup" and not any("ProcessGroup" in b for b in capability["blocked_by"]):
            continue  # only for a model that holds a group
        check = checks.get(verified_by) if verified_by else None
        if check is not None and verified_by in capability["checks"]:
            continue  # the very operation that failed is no remedy for itself
        if check is None or check.outcome == Outcome.SKIPPED.value:
            status = "untested"
        elif _bad(check):
            status = "tried here: fails too"
        else:
            status = "tried here: works"
        found.append({"key": key, "text": text, "status": status, "check": verified_by})
    return found


def answer(report):
    """The model's answer as data (the JSON report's ``model``), or None without --model."""
    from ..core.outcomes import exit_code

    lines = capability_lines(report)
    if not lines:
        return None
    failing = [line for line in lines if line["status"] == FAILS]
    for line in failing:
        line["remedies"] = remedies(report, line)
    return {"spec": spec(report), "capabilities": lines,
            "fails": [line["key"] for line in failing],
            "exit_code": int(exit_code(report.checks, None, False)),
            "exit_code_strict": int(exit_code(report.checks, None, True))}


def settle(report):
    """One judgement per fact, and only remedies tried here, for a --model run.

    A failing copy of the user's model stopped by the same attributes is one fact,
    whichever probe made the copy: every such check takes the verdict and expectation of
    the serialization check that judged it (the matrix's entry, observed on the
    releases), and says whose they are. Every failing copy check's advice is then the
    same: what stops the copy, and the remedies this run tried on this model."""
    if not spec(report):
        return report
    checks = _by_id(report)
    judges = [checks[i] for i in JUDGE_OF_COPIES
              if i in checks and _bad(checks[i]) and checks[i].verdict and blocked_by(checks[i])]
    for cid in COPY_CHECKS:
        check = checks.get(cid)
        if check is None or check in judges or not _bad(check):
            continue
        same = next((j for j in judges if set(blocked_by(j)) == set(blocked_by(check))), None)
        if same is None:
            continue
        check.verdict, check.expectation = same.verdict, same.expectation
        said = " (the same failure as %s)" % same.id
        if said not in (check.detail or ""):  # a report judged again says it once
            check.detail = (check.detail or "").rstrip() + said
    for line in capability_lines(report):
        if line["status"] != FAILS or line["key"] not in ANSWERS:
            continue
        advice = advice_text(line, remedies(report, line))
        for cid in line["checks"]:
            if cid in COPY_CHECKS and blocked_by(checks[cid]):
                checks[cid].advice = advice
    return report


def advice_text(line, found):
    """'do not deepcopy this model (blocks.0.sp_group (ProcessGroup) cannot be copied):
    build the copy fresh ... (tried here: works); ... (untested)'."""
    what = {"deepcopy": "deepcopy", "pickle": "pickle or torch.save",
            "framework": "deepcopy"}[line["key"]]
    head = "do not %s this model%s" % (what, " after the framework wraps it"
                                       if line["key"] == "framework" else "")
    if line["blocked_by"]:
        head += " (%s cannot be copied)" % ", ".join(line["blocked_by"])
    offered = ["%s (%s)" % (r["text"], r["status"]) for r in found
               if r["status"] != "tried here: fails too"]
    failed = [r["text"].split(": ", 1)[-1] for r in found
              if r["status"] == "tried here: fails too"]
    text = head + (": " + "; or ".join(offered) if offered else "")
    if failed:
        text += "; not %s (tried here: fails too)" % " nor ".join(failed)
    return text

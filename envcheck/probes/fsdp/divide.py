"""TorchTitan's gradient reduction: FSDP2 with the gradient divide factor set to 1.0.

TorchTitan (0.2.2, ``torchtitan/models/llama3/infra/parallelize.py``:
``disable_fsdp_gradient_division``, called by ``apply_fsdp`` for llama3, llama4, flux and
others) sets every FSDP module's ``set_gradient_divide_factor(1.0)`` and scales the
gradients by the global token count itself. With a factor that is not the group's size,
FSDP2 reduce-scatters with ``ReduceOp.PREMUL_SUM(1 / factor)``
(``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``,
``_get_gradient_divide_factors``), an op NCCL has and gloo does not. This check does
what TorchTitan does, on the ranks' backend, and compares the gradients with the sum of
the ranks' gradients (the unsharded reference times the number of ranks).

Where that backward raises (gloo), the remedy is tried in the same run: the same factor
with ``set_force_sum_reduction_for_comms(True)`` on every FSDP module, which makes FSDP2
reduce with ReduceOp.SUM and scale by itself. Resetting the factor to its default is no
remedy: TorchTitan divides by the token count itself, and FSDP2's default divides by the
number of ranks as well, so the gradients would be that many times too small.
"""

_NO_DEFAULT = ("do not reset the divide factor to its default: TorchTitan divides by the "
               "global token count itself, so the default's division by the %d ranks would "
               "make its gradients %d times too small")


def gradient_divide(ctx, c, run, skip):
    if skip:
        c.skip(skip)
    from . import steps as fs

    if run.no_forward:
        c.skip(run.no_forward)
    mesh = run.trained[2]
    ref, model, how = run._pair(mesh)
    modules = [m for m in model.modules() if hasattr(m, "set_gradient_divide_factor")]
    if not modules:
        c.skip("torch %s's FSDP2 modules have no set_gradient_divide_factor"
               % run.torch.__version__)
    batches = [fs.inputs_for(ref, r, ctx.device) for r in range(ctx.world_size)]
    if batches[0] is None:
        c.skip("the model has no example_inputs: no backward to reduce")
    for m in modules:
        m.set_gradient_divide_factor(1.0)
    opt, ref_opt = fs.make_optimizer(model), fs.make_optimizer(ref)
    fs.reference_step(ref, ref_opt, batches)
    n = ctx.world_size
    want = {k: g * n for k, g in fs.grads(ref).items()}
    try:
        fs.step(model, opt, batches[ctx.rank], ctx.rank)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        tried = _force_sum(ctx, run, mesh, batches, want)
        c.data["force_sum_reduction"] = tried
        c.advice = _advice(tried, n)
        c.fail("with set_gradient_divide_factor(1.0) on every FSDP module (TorchTitan's "
               "disable_fsdp_gradient_division), the backward on %s (backend %s) raised "
               "%s: %s; with set_force_sum_reduction_for_comms(True) as well: %s"
               % (ctx.device.type, ctx.backend, type(exc).__name__,
                  text[0][:200] if text else "", tried))
    bad, worst, exact = fs.compare(fs.grads(model), want)
    c.data.update(sharded=how, max_grad_difference=worst, grads_bit_exact=exact)
    if bad:
        # Only here: where the backward raises, the matrix's advice for that error speaks.
        c.advice = ("FSDP2 with set_gradient_divide_factor(1.0), as TorchTitan's apply_fsdp "
                    "sets it, gives other gradients than the sum over the ranks here: do "
                    "not train TorchTitan-style on this torch/backend")
        c.fail("with set_gradient_divide_factor(1.0) the gradients are not the sum of the "
               "%d ranks' gradients: %s" % (n, ", ".join(bad[:3])))
    c.detail = ("set_gradient_divide_factor(1.0) on %d FSDP modules, as TorchTitan does: "
                "the gradients are the sum over the %d ranks (%s); %s, %s"
                % (len(modules), n, "bit-exact" if exact else "within rtol %g" % fs.RTOL,
                   run.subject.label, how))


def _force_sum(ctx, run, mesh, batches, want):
    """The remedy, on a fresh pair: the factor at 1.0 and sum-only reductions. 'works:
    the gradients are the sum over the N ranks (bit-exact)', or what went wrong."""
    from . import steps as fs

    _, model, _ = run._pair(mesh)
    modules = [m for m in model.modules() if hasattr(m, "set_gradient_divide_factor")]
    if not all(hasattr(m, "set_force_sum_reduction_for_comms") for m in modules):
        return "untested: torch %s's FSDP2 has no set_force_sum_reduction_for_comms" % (
            run.torch.__version__)
    for m in modules:
        m.set_gradient_divide_factor(1.0)
        m.set_force_sum_reduction_for_comms(True)
    try:
        fs.step(model, fs.make_optimizer(model), batches[ctx.rank], ctx.rank)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return "fails too: %s: %s" % (type(exc).__name__, text[0][:160] if text else "")
    bad, _, exact = fs.compare(fs.grads(model), want)
    if bad:
        return "fails too: the gradients are not the sum of the %d ranks' (%s)" % (
            len(batches), ", ".join(bad[:3]))
    return "works: the gradients are the sum over the %d ranks (%s)" % (
        len(batches), "bit-exact" if exact else "within rtol %g" % fs.RTOL)


def _advice(tried, n):
    head = ("TorchTitan's gradient reduction (set_gradient_divide_factor(1.0)) needs "
            "ReduceOp.PREMUL_SUM, which this backend lacks")
    no_default = _NO_DEFAULT % (n, n)
    if tried.startswith("works"):
        return ("%s: also call set_force_sum_reduction_for_comms(True) on every FSDP module "
                "(tried here: works, the gradients are the sum over the ranks); %s"
                % (head, no_default))
    return ("%s: run it where the backend has PREMUL_SUM (NCCL); "
            "set_force_sum_reduction_for_comms(True) %s here; %s"
            % (head, "is untested" if tried.startswith("untested") else "fails too",
               no_default))

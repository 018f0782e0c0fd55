"""The probes: what each rank runs, and their declaration.

- The declaration, which the supervisor reads without torch: ``spec.py`` (what a probe
  is), ``suite.py`` (the built-in probes, in the order they run), ``catalog.py`` (the
  suite plus custom probes, and the selection ``-p``/``--skip`` make). stdlib and
  envcheck/core only.
- The probes' code, run in the ranks (stdlib, torch and envcheck/worker only): one
  module per probe, or a package when a probe has helpers (the probe in its
  ``__init__``), each a function ``probe_NAME(ctx)`` that imports torch inside it.
- ``shared/``: what two probes use (DCP's API across releases, state dicts, the
  checkpoint directory, copies compared, sizes). A probe never imports another's
  modules (tests/test_probe_suite.py).
"""

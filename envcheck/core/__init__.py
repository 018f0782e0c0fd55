"""The run model both sides share: stdlib only.

The supervisor (``envcheck run``, ``envcheck report --records``) and every rank (under
``envcheck run`` or a launcher) import this package, so a rank under an interpreter with
nothing but torch can too. It holds what the two drivers must agree on: the plan and the
probe catalog, the record stream and the phases read from it, which rank is to blame,
how an attempt ended, atomic writes, outcomes and exit codes. See docs/architecture.md.
"""

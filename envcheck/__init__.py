"""envcheck: does distributed PyTorch training really work in this environment?

This file must stay stdlib-only: worker ranks import the ``envcheck`` package
under interpreters where only torch is installed (``envcheck run --python``).
"""

__version__ = "0.1.0"

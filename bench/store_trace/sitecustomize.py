"""Every TCPStore call a process makes, logged: bench/store_load.py's ``--trace`` puts
this directory first on PYTHONPATH of a real launcher-mode job, so that what envcheck's
ranks, watchers and relays send to the job's store is measured, not guessed.

Each process appends one JSON line per call to ``$ENVCHECK_STORE_TRACE/PID.jsonl``:
time, op, key, bytes sent, bytes back, seconds, and the process's command line.
Only a measuring tool: never on envcheck's own path.
"""

import importlib.abc
import importlib.util
import json
import os
import sys
import time

_DIR = os.environ.get("ENVCHECK_STORE_TRACE")
_WRAPPED = ("set", "get", "add", "check", "compare_set", "wait", "delete_key",
            "multi_get", "multi_set", "append", "num_keys")


def _size(value):
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value)
    return 0


def _patch(module):
    store = getattr(module, "TCPStore", None)
    if store is None or getattr(store, "_envcheck_traced", False):
        return
    def wrap(name, original):
        def traced(self, *args, **kwargs):
            t0 = time.time()
            result = original(self, *args, **kwargs)
            key = args[0] if args else ""
            # now, not when torch was imported: a fork server's forks are other processes
            role = " ".join(os.path.basename(a) for a in sys.argv[:3])
            line = {"t": t0, "op": name, "key": key if isinstance(key, str) else str(key)[:80],
                    "sent": _size(args[1:]), "back": _size(result),
                    "s": time.time() - t0, "pid": os.getpid(), "role": role}
            with open(os.path.join(_DIR, "%d.jsonl" % os.getpid()), "a") as f:
                f.write(json.dumps(line) + "\n")
            return result
        return traced

    for name in _WRAPPED:
        original = getattr(store, name, None)
        if original is not None:
            try:
                setattr(store, name, wrap(name, original))
            except (AttributeError, TypeError):
                pass
    store._envcheck_traced = True


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch.distributed":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def patched(module):
            exec_module(module)
            _patch(module)
        loader.exec_module = patched
        return spec


if _DIR:
    os.makedirs(_DIR, exist_ok=True)
    sys.meta_path.insert(0, _Finder())

"""``envcheck explain``: a failed job's log in; the cause, the fix and the source out.

The knowledge is the matrix's (``[[signature]]`` entries, ``matrix/signatures.py``);
this package only reads logs and renders what matched:

- ``read``: the log as raw bytes, in chunks, and only the lines that hold a word a
  signature or a version fact can start from (a C-speed search: a 2 GB log in seconds,
  memory flat);
- ``line``: one such line normalised (colour codes, CR, invalid UTF-8) and its launcher
  prefix read off (``[rank3]:``, ``3:``, ``[default0]:``, NCCL's ``host:pid:tid [dev]``);
- ``match``: lines against the signatures, into findings (one per cause, with its ranks
  and hosts and the first line that shows it);
- ``facts``: the versions the job printed (torch, NCCL, CUDA, driver) and their
  judgement against the matrix;
- ``render``: text and JSON; ``command``: the whole, as a library call;
- ``diagnose``: the same signatures applied to ``envcheck run``'s own failing checks.
"""

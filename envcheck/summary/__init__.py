"""``envcheck summary``: many nodes' answers (``check --json``, ``run --json``) as one screen."""

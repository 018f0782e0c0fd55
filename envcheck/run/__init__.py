"""``envcheck run``: plan, start and watch the ranks, merge their records."""

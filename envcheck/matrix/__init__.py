"""The version matrix: facts and expectations (``data/``), loading, verdicts."""

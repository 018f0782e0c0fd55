"""Every screen and file envcheck writes, rendered from data (a Report, a check answer, a
summary, an explanation, the matrix, the live view of a run). Nothing here judges: the
verdicts are set before (api.judge); nothing here runs anything."""

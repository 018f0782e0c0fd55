"""Hand envcheck's answer to the fleet's own tools: the hosts a run or a summary blames, as
SLURM hostlists and drain commands (``scheduler``), and metrics for node_exporter's
textfile collector (``metrics``)."""

"""``envcheck check``: will a torch wheel work on this node, before it is installed."""

"""What both operator modes share (the layer under ``replication/`` and ``cluster/``)."""

"""What both operator modes share."""

"""Example operators built on pyctrl."""

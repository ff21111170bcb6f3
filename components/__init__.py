"""Pulumi ComponentResources for a SUNK cluster (installed as `sunk.components`)."""

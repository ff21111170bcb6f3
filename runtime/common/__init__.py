"""Glue shared by the long-running runtime processes (syncer, operator, scheduler)."""

"""Test and benchmark support (installed as `sunk.runtime.testing`): never imported by the
operator, syncer or scheduler themselves. Needs the dev dependency kmock."""

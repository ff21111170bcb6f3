"""The mutating admission webhook of the opted-in namespaces (sunk.spec.inference): their pods go
to sunk's scheduler, their GPUs to Slurm, their usage to the team's account.

Layers: `admission` (pure: AdmissionReview in, AdmissionReview out), `server` (HTTPS, the serving
certificate re-read when it is renewed), `__main__` (settings, health, metrics).
"""

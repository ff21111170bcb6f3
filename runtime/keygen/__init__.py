"""The key generator (`python -m sunk.runtime.keygen`): a one-shot Job that creates the cluster's
keys and passwords in the cluster (sunk.manifests.keygen renders it).

plan.py decides (pure: the Secret bodies from the wanted list and the generated values),
values.py makes the values (the kernel's CSPRNG, ssh-keygen), __main__.py creates the Secrets.
It may only create Secrets: it never reads one, so an existing Secret, whoever made it, is left
as it is (the create answers 409 AlreadyExists). It logs names and keys, never a value."""

"""The key generator (`python -m sunk.runtime.keygen`): a one-shot Job that creates the cluster's
keys and passwords in the cluster (sunk.manifests.keygen renders it).

plan.py decides (pure: the Secret bodies from the wanted list and the generated values),
rollover.py decides when the webhook's serving certificate and CA are renewed (pure: from their
dates and now), values.py makes the values (the kernel's CSPRNG, ssh-keygen, openssl), __main__.py
creates the Secrets. It creates Secrets, and reads and replaces only a TLS Secret it made (the
webhook's certificate), by name, to renew its serving certificate and roll its CA over; any other
existing Secret, whoever made it, is left as it is (the create answers 409 AlreadyExists). It logs
names, keys and dates, never a value."""

"""In-memory Slurm and Kubernetes APIs for each controller's glue tests and benchmarks: the
`SlurmApi`/`KubeApi` protocols of runtime/<controller>/ with one fake each."""

# The two commands of the README. Each installs what it needs first (.ci/bootstrap).
.PHONY: demo test lint bootstrap

bootstrap:
	bash .ci/bootstrap

# The main job, offline, default stack: validate, render, boot real Slurm locally, run a job.
demo: bootstrap
	.venv/bin/sunk demo

# Everything CI runs: lint, types, layers, then the whole pytest suite (real Slurm included).
test: bootstrap lint
	.venv/bin/python -m pytest

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy sunk components runtime
	.venv/bin/lint-imports

# The two commands of the README. Each installs what it needs first (.ci/bootstrap).
.PHONY: demo test check lint bootstrap images

bootstrap:
	bash .ci/bootstrap

# The main job, offline, on the acme-dev stack: validate, render, boot real Slurm locally, run a job.
demo: bootstrap
	.venv/bin/sunk demo acme-dev

# Every image the manifests name, built from Debian trixie packages (cached by input hash).
images: bootstrap
	.venv/bin/sunk images build

# Everything CI runs: lint, types, layers, the images, then the whole pytest suite (real Slurm
# booted from those images included).
test: bootstrap lint images
	.venv/bin/python -m pytest

# The quick loop while writing code: lint and every test that needs neither images nor real
# Slurm (spec, renders, manifests, components, the controllers against fakes and kmock).
check: bootstrap lint
	.venv/bin/python -m pytest -m "not slurm and not images"

# Shell: the pods' start scripts and the image recipes (run by `sh -euc`, see runtime/images/build.py),
# at shellcheck's strictest severity: they are few and short, and style findings there are real.
SHELL_SCRIPTS = sunk/manifests/scripts/*.sh runtime/images/*/pre-install.sh runtime/images/*/post-install.sh \
	$(shell grep -rlE '^#!(/usr)?/bin/(env )?sh' runtime/images/*/rootfs)

lint:
	shellcheck --shell=sh --severity=style $(SHELL_SCRIPTS)
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	.venv/bin/lint-imports

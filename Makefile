# The two commands of the README. Each installs what it needs first (.ci/bootstrap).
.PHONY: demo test test-compat check lint bootstrap images docs-ref controlplane test-controlplane bench-ha bench-ha-soak

bootstrap:
	bash .ci/bootstrap

# The main job, offline, on the acme-dev stack: its images and the local cluster's control plane
# (Kubernetes' own, built from the pinned Go modules; cached), then the whole stack on a local
# cluster (`sunk local demo`: pods, sinfo, a job, a pod placed by Slurm beside one, a drain), torn down after.
# On a fresh machine the control plane's Go build (CPU) runs beside the images' build (mostly
# downloads and unpacking); each is a cache lookup once built.
demo:
	SUNK_BOOTSTRAP_TEST_TOOLS=0 bash .ci/bootstrap
	.venv/bin/sunk local controlplane build & plane=$$!; .venv/bin/sunk images build --unpack && wait $$plane
	.venv/bin/sunk local demo acme-dev

# Every image the manifests name, for each supported Slurm release (26.05 from Debian sid, 24.11
# from trixie; cached by input hash).
images: bootstrap
	.venv/bin/sunk images build --slurm 26.05
	.venv/bin/sunk images build --slurm 24.11

# Everything CI runs: lint, types, layers, the images and the control plane, then the whole pytest
# suite (real Slurm booted from those images, the local cluster on the real control plane included).
# Each step is timed (.ci/timed): the log ends with every step's wall time, pass or fail.
test: bootstrap
	@bash .ci/timed --reset
	@bash .ci/timed lint $(MAKE) --no-print-directory lint
	@bash .ci/timed images $(MAKE) --no-print-directory images
	@bash .ci/timed controlplane $(MAKE) --no-print-directory controlplane
	@bash .ci/timed pytest .venv/bin/python -m pytest
	@bash .ci/timed test-compat $(MAKE) --no-print-directory test-compat

# The compatibility subset on Slurm 24.11 (the default release, 26.05, runs everything above):
# boot and jobs, accounting, the syncer, operator and scheduler, identity, power saving, health
# checks, the REST and text readers, slurmdbd.conf as real slurmdbd reads it, and the daemons'
# logs (test_logs reads the shared acme-dev cluster's logs: it runs before test_scheduling, as in
# the full suite's order). Every cluster the harness starts runs 24.11 unless its stack names a
# release.
COMPAT_TESTS = tests/slurm/test_accounting_lifecycle.py tests/slurm/test_accounting_restapi.py \
	tests/slurm/test_dbd_parse_back.py \
	tests/slurm/test_health.py tests/slurm/test_identity.py tests/slurm/test_logs.py tests/slurm/test_nodes.py \
	tests/slurm/test_power.py tests/slurm/test_scheduling.py tests/runtime/operator/test_real_slurm.py \
	tests/runtime/scheduler/test_real_slurm.py tests/runtime/slurmrest/test_jobtext_real.py \
	tests/runtime/slurmrest/test_nodetext_real.py tests/runtime/slurmrest/test_real_slurm.py \
	tests/runtime/syncer/test_real_slurm.py
test-compat: bootstrap
	SUNK_HARNESS_SLURM_VERSION=24.11 .venv/bin/python -m pytest $(COMPAT_TESTS)

# The quick loop while writing code: lint and every test that needs neither images nor real
# Slurm (spec, renders, manifests, components, the controllers against fakes and kmock).
check: bootstrap lint
	.venv/bin/python -m pytest -m "not slurm and not images and not controlplane"

# The real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
# the local cluster runs, built from the pinned Go modules (runtime/local/gomodules) into
# ~/.cache/sunk/controlplane/<hash of the pins>. Cold: about 10 CPU-minutes and 1 GB of Go modules
# (tens of minutes of wall time on a loaded 2-core machine); built already: a no-op. `make check`
# neither builds it nor runs its tests (marker `controlplane`).
controlplane: bootstrap
	.venv/bin/sunk local controlplane build

# The real control plane's own tests (marker `controlplane`): etcd, kube-apiserver, the controllers
# and the scheduler under the real kubectl, and our node agent as their kubelet (a pod from the
# slurmctld image, hence the images).
test-controlplane: controlplane
	.venv/bin/sunk images build --unpack
	.venv/bin/python -m pytest -m controlplane tests/runtime/local/controlplane

# The generated reference (docs/reference/: spec fields, CLI, environment variables, metrics and
# alerts) from the code; tests/docs/test_reference.py fails when the pages and the code disagree.
docs-ref: bootstrap
	.venv/bin/python -m sunk.reference

# On demand: slurmctld outages with and without a backup on real daemons (bench/ha_bench.py,
# a few minutes; root and the cached images). Not part of `make test`.
bench-ha: bootstrap
	.venv/bin/python -m bench.ha_bench

# On demand: 30 minutes of a primary and backup under jobs, counting spurious takeovers.
bench-ha-soak: bootstrap
	.venv/bin/python -m bench.ha_bench --soak 1800

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

#!/bin/sh
# The reconfigure path of the controller pod (sunk/manifests/controller.py): when the mounted
# Slurm files change, run `scontrol reconfigure`; a change to a restart-class setting is left to
# the new pod template, which replaces slurmctld.
set -u
dir=@SLURM_ETC@
restart_keys=@RESTART_KEYS@
heartbeat=@HEARTBEAT@
period=@PERIOD@
# This shell is its container's PID 1, which ignores SIGTERM unless it handles it: without the trap
# every deletion of the pod waited out its grace period (120 s) before SIGKILL. The sleep runs in
# the background so that the trap runs as soon as the signal comes.
trap 'exit 0' TERM INT
# The projected volume swaps a `..data` symlink atomically; read through it, skip the keys.
fingerprint() {
  find -L "$dir" -type f ! -path '*/..*' ! -name '*.key' | sort | xargs cat | grep -v -E "^($restart_keys)=" | sha256sum
}
restart_class() { grep -h -E "^($restart_keys)=" "$dir/slurm.conf" | sort | sha256sum; }
seen=$(fingerprint)
boot=$(restart_class)
while :; do
  touch "$heartbeat"
  sleep "$period" &
  wait $!
  now=$(fingerprint)
  [ "$now" = "$seen" ] && continue
  if [ "$(restart_class)" != "$boot" ]; then
    echo "restart-class settings changed: the new pod template replaces slurmctld; not reconfiguring"
    seen=$now
  elif scontrol reconfigure; then
    echo "configuration changed: scontrol reconfigure done"
    seen=$now
  else
    echo "scontrol reconfigure failed; retrying in ${period}s" >&2
  fi
done

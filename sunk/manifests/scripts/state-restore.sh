#!/bin/sh
# Puts StateSaveLocation back exactly as state-snapshot.sh copied it (docs/upgrading.md: going
# back after a failed slurmctld start on the new release). slurmctld must be stopped. The
# controllers' lock (LOCK: slurmctld-start.sh), which the state-guard holds meanwhile, stays as it is.
set -eu
state=@STATE@
dir=@DIR@
name=@NAME@
lock=@LOCK@
(cd "$dir/$name" && sha256sum -c --quiet "$dir/$name.sha256") || {
  echo "state-restore: $dir/$name does not match its checksums; not restoring it" >&2
  exit 1
}
# Every file the failed start wrote goes: the state is the snapshot's, nothing more.
find "$state" -mindepth 1 ! -path "$state/$lock" -delete
# What the folder holds, not the folder itself: in a pod StateSaveLocation is its volume's root,
# owned by root, whose times and mode slurmctld's user may not set (`cp -a SNAPSHOT/. STATE/`
# failed there: "preserving times for '/var/spool/slurmctld/.': Operation not permitted").
find "$dir/$name" -mindepth 1 -maxdepth 1 -exec cp -a {} "$state/" \;
(cd "$state" && sha256sum -c --quiet "$dir/$name.sha256")
echo "state-restore: $state is $dir/$name again ($(wc -l < "$dir/$name.sha256") files, checksums match)"

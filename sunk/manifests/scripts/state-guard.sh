#!/bin/sh
# slurmctld's pod, while slurm.upgradeFrom is set (sunk/manifests/upgrade.py; docs/upgrading.md),
# before slurmctld starts. It compares the release that wrote StateSaveLocation with this image's:
#   older  the state is about to be converted: copy it first (state-snapshot.sh), once; a copy
#          taken before the conversion is never replaced by one of converted files
#   newer  going back (the stack's slurm.version set back after a failed or unwanted upgrade):
#          put back the copy this release took (state-restore.sh), then set that copy aside so
#          a later upgrade takes a fresh one; without a copy, refuse (this slurmctld can't read it)
#   same   nothing to do
# A restore marks itself first (statesave-<release>.restoring) and clears the mark once its copy
# is set aside: a restore stopped midway (the pod deleted, the Node lost) has left StateSaveLocation
# part emptied, part copied, in the old release's format or empty, which would read as "same" or
# as "a new cluster"; the mark makes the next start finish it instead.
# slurmctld writes job_state, node_state, part_state, resv_state and trigger_state (and their
# .old copies) as the packed string "PROTOCOL_VERSION" (a 4-byte length, 17 bytes with its NUL)
# followed by its protocol version, whose first byte numbers the release (measured: 42 on 24.11,
# 45 on 26.05; `protocols` lists every release sunk supports). It rewrites each file only when
# what it holds changes, so the state's release is the newest any of them carries (measured on a
# local cluster: slurmctld 26.05 had rewritten node_state once the nodes registered, and
# job_state not after five minutes; a crash then leaves both releases' files).
set -eu
state=@STATE@
dir=@DIR@
release=@RELEASE@
source=@SOURCE@
protocols=@PROTOCOLS@
snapshot=@SNAPSHOT@
restore=@RESTORE@
copy="$dir/statesave-$release"
marker="$copy.restoring"
set_aside() {
  aside="$copy.restored-$(date -u +%Y%m%dT%H%M%SZ)"
  if [ -e "$copy.sha256" ]; then mv "$copy.sha256" "$aside.sha256"; fi
  if [ -e "$copy" ]; then mv "$copy" "$aside"; fi
  rm -f "$marker"
  echo "state-guard: $state is the copy taken on $release again (set aside as $aside)"
}
if [ -e "$marker" ]; then
  if [ -e "$copy.sha256" ] && [ -d "$copy" ]; then
    echo "state-guard: the restore of $copy into $state was stopped before it finished: it runs again"
    sh -c "$restore"
  else
    echo "state-guard: the restore of $copy into $state had finished before it was stopped"
  fi
  set_aside
  exit 0
fi
file="$state/job_state"
if [ ! -s "$file" ]; then
  echo "state-guard: no saved state in $state (a new cluster): nothing to copy or restore"
  exit 0
fi
if [ "$(dd if="$file" bs=1 skip=4 count=16 2>/dev/null)" != PROTOCOL_VERSION ]; then
  echo "state-guard: $file does not start as slurmctld's state files do; not touching it" >&2
  exit 1
fi
written=0
files=""
for f in "$state"/*; do
  if [ ! -f "$f" ] || [ "$(dd if="$f" bs=1 skip=4 count=16 2>/dev/null)" != PROTOCOL_VERSION ]; then
    continue
  fi
  v=$(od -An -tu1 -j21 -N1 "$f" | tr -d ' ')
  if [ -z "$v" ]; then continue; fi
  if [ "$v" -gt "$written" ]; then
    written=$v files=${f##*/}
  elif [ "$v" -eq "$written" ]; then
    files="$files ${f##*/}"
  fi
done
name_of() {
  for pair in $protocols; do
    [ "${pair%%=*}" = "$1" ] && { echo "${pair#*=}"; return; }
  done
  echo "an unknown release (protocol $1)"
}
number_of() {
  for pair in $protocols; do
    [ "${pair#*=}" = "$1" ] && { echo "${pair%%=*}"; return; }
  done
}
mine=$(number_of "$release")
by=$(name_of "$written")
if [ "$written" -eq "$mine" ]; then
  echo "state-guard: $state was written by Slurm $release, this slurmctld's release: nothing to do"
elif [ "$written" -lt "$mine" ]; then
  if [ "$written" -ne "$(number_of "$source")" ]; then
    echo "state-guard: $state was written by Slurm $by, not $source as slurm.upgradeFrom says; set slurm.upgradeFrom to the release the cluster runs" >&2
    exit 1
  fi
  if [ -e "$dir/statesave-$source.sha256" ]; then
    echo "state-guard: $dir/statesave-$source exists (taken before the conversion); kept as it is"
  else
    sh -c "$snapshot"
  fi
  echo "state-guard: slurmctld $release converts the state of $source"
else
  if [ ! -e "$dir/statesave-$release.sha256" ]; then
    echo "state-guard: $state was written by Slurm $by, newer than this slurmctld ($release) in $files, and $dir holds no copy taken on $release (statesave-$release): slurmctld $release can't read it; set slurm.version back to the newer release" >&2
    exit 1
  fi
  echo "state-guard: $state was written by Slurm $by, newer than this slurmctld in $files: the copy taken on $release goes back"
  : > "$marker"
  sh -c "$restore"
  set_aside
fi

#!/bin/sh
# slurmctld's pod, before slurmctld starts, in every render (sunk/manifests/upgrade.py;
# docs/upgrading.md). It compares the release that wrote StateSaveLocation with this image's:
#   older  the state is about to be converted: with slurm.upgradeFrom naming that release, copy
#          it first (state-snapshot.sh), once; a copy taken before the conversion is never
#          replaced by one of converted files. Otherwise refuse: nobody announced the upgrade
#   newer  going back (the stack's slurm.version set back after a failed or unwanted upgrade):
#          put back the copy this release took (state-restore.sh), then set that copy aside so
#          a later upgrade takes a fresh one; without a copy, refuse (this slurmctld can't read it).
#          The copy is refused too where jobs were submitted after it was taken (the next job id
#          job_state carries differs from the copy's): restoring it would lose them, unless
#          slurm.acceptJobLoss says so
#   same   nothing to do (no copy, no volume written: a same-release restart costs two reads)
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
# job_state not after five minutes; a crash then leaves both releases' files). job_state goes on
# with the time it was saved (8 bytes) and the next job id slurmctld will give (4 bytes, big-endian).
# With backups (controller.replicas 2-3, `peers` the address:port of every SlurmctldHost) the
# controller pods share StateSaveLocation and the backup volume, and the StatefulSet is OnDelete:
# an upgrade starts each pod of the new template only once its old one is deleted. So the guards
# take turns (a lock folder on the backup volume naming its holder; a pod restarted while holding
# it takes it back), and before a conversion or a restore the first waits until no controller
# answers at its address: a primary still saving its state, or an old standby that would take
# over and write the folder while it is copied, or run its release beside the new one. It marks
# that every old controller stopped (.controllers-moved-<from>-<to>, removed when going back), so
# the guards that follow, whose peers of the new release answer by then, don't wait on them; they
# find the copy taken and write nothing.
# Not answering is not the same as stopped: a slurmctld told to stop closes its port, then saves
# its state. So before a conversion or a restore the guard first takes the controllers' lock
# (LOCK, in StateSaveLocation) exclusively: every slurmctld's container holds it shared from before
# slurmctld starts until after it exits (slurmctld-start.sh), so the guard gets it once every
# slurmctld of the folder has exited, and holds it, so that none starts, until the state is
# copied or restored. The address check still follows, for controllers of a template that took
# no lock. A volume that takes no locks is said in the log, and the addresses decide alone.
set -eu
state=@STATE@
dir=@DIR@
controllers=@LOCK@
release=@RELEASE@
source=@SOURCE@
announced=@ANNOUNCED@
accept_loss=@ACCEPT_LOSS@
protocols=@PROTOCOLS@
peers=@PEERS@
snapshot=@SNAPSHOT@
restore=@RESTORE@
copy="$dir/statesave-$release"
marker="$copy.restoring"
lock="$dir/.state-guard.lock"
if [ -n "$peers" ]; then
  me=$(hostname -s)
  said=""
  mkdir -p "$dir"
  until mkdir "$lock" 2>/dev/null; do
    holder=$(cat "$lock/holder" 2>/dev/null || true)
    if [ "$holder" = "$me" ]; then
      echo "state-guard: $lock was left by an earlier start of this pod: taken back"
      break
    fi
    if [ -z "$said" ]; then
      echo "state-guard: waiting for the state-guard of ${holder:-another controller pod} ($lock; remove it if that pod is gone for good)"
      said=yes
    fi
    sleep 2
  done
  echo "$me" > "$lock/holder"
  trap 'rm -rf "$lock"' EXIT
  trap 'exit 143' TERM INT
fi
# `answering`: the first controller address that accepts a connection (none: every slurmctld stopped).
answering() {
  for peer in $peers; do
    # bash opens /dev/tcp/HOST/PORT as a connection (sh has no such path); $1 and $2 are its own.
    # shellcheck disable=SC2016
    if timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' sh "${peer%:*}" "${peer##*:}" 2>/dev/null; then
      echo "$peer"
      return
    fi
  done
}
# `exclusive`: the controllers' lock, taken exclusively and held until this guard ends (its
# descriptor 9): every slurmctld on the folder has exited, and none starts meanwhile.
held=""
exclusive() {
  if [ -n "$held" ]; then return 0; fi
  if ! true 9<>"$controllers" 2>/dev/null; then
    echo "state-guard: $controllers can't be opened: a running slurmctld is known by its address alone" >&2
    return 0
  fi
  exec 9<>"$controllers"
  got=0
  flock -x -n 9 || got=$?
  if [ "$got" -eq 1 ]; then
    echo "state-guard: a slurmctld still runs on $state (its container holds $controllers): waiting until it has exited"
    got=0
    flock -x 9 || got=$?
    if [ "$got" -eq 0 ]; then echo "state-guard: every slurmctld on $state has exited"; fi
  fi
  if [ "$got" -ne 0 ]; then
    echo "state-guard: $controllers takes no lock on this volume (flock: $got): a running slurmctld is known by its address alone" >&2
    return 0
  fi
  held=yes
}
# Before the state is copied or restored: until every slurmctld holding the controllers' lock has
# exited, and no controller answers (without backups, at once: slurmctld's own pod is the only
# one, and it is not started yet).
all_stopped() {
  exclusive
  said=""
  while alive=$(answering) && [ -n "$alive" ]; do
    if [ -z "$said" ]; then
      echo "state-guard: a slurmctld still answers at $alive: waiting until every controller pod of the old template is deleted"
      said=yes
    fi
    sleep 2
  done
  if [ -n "$said" ]; then echo "state-guard: no slurmctld answers any more"; fi
}
set_aside() {
  aside="$copy.restored-$(date -u +%Y%m%dT%H%M%SZ)"
  if [ -e "$copy.sha256" ]; then mv "$copy.sha256" "$aside.sha256"; fi
  if [ -e "$copy" ]; then mv "$copy" "$aside"; fi
  rm -f "$marker" "$dir/.controllers-moved-$release-"*
  echo "state-guard: $state is the copy taken on $release again (set aside as $aside)"
}
# `next_job FILE`: the next job id a job_state file carries (empty where it is too short).
next_job() { od -An -tu4 --endian=big -j31 -N4 "$1" 2>/dev/null | tr -d ' \n'; }
saved_at() {
  t=$(od -An -tu8 --endian=big -j23 -N8 "$1" 2>/dev/null | tr -d ' \n')
  if [ -n "$t" ]; then date -u -d "@$t" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo "$t"; else echo "an unknown time"; fi
}
if [ -e "$marker" ]; then
  if [ -e "$copy.sha256" ] && [ -d "$copy" ]; then
    echo "state-guard: the restore of $copy into $state was stopped before it finished: it runs again"
    all_stopped
    sh -c "$restore"
  else
    echo "state-guard: the restore of $copy into $state had finished before it was stopped"
  fi
  set_aside
  exit 0
fi
# slurmctld saves by writing job_state.new, then renaming job_state to job_state.old and the new
# file to job_state: between the two renames, or after a save a kill cut short, job_state is
# missing while the cluster's state is there (slurmctld itself then reads job_state.old). Only a
# folder with none of the three is a new cluster.
file="$state/job_state"
for f in "$state/job_state" "$state/job_state.old" "$state/job_state.new"; do
  if [ -s "$f" ]; then file=$f; break; fi
done
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
  if [ -z "$announced" ]; then
    echo "state-guard: $state was written by Slurm $by and this slurmctld is $release, but slurm.upgradeFrom is unset: nobody announced the upgrade, and slurmctld $release would convert the state files with no snapshot taken. To keep running $by, set slurm: {version: \"$by\"}; to upgrade, announce it: slurm: {version: \"$release\", upgradeFrom: \"$by\"} (docs/upgrading.md)" >&2
    exit 1
  fi
  if [ "$written" -ne "$(number_of "$source")" ]; then
    echo "state-guard: $state was written by Slurm $by, not $source as slurm.upgradeFrom says; set slurm.upgradeFrom to the release the cluster runs" >&2
    exit 1
  fi
  # With backups: the first guard here waits until every controller of $source stopped (none may
  # run beside $release, nor write the folder while it is copied) and marks it; the guards of the
  # other new pods find the mark and do not wait on this release's controllers, which answer by then.
  moved="$dir/.controllers-moved-$source-$release"
  if [ -n "$peers" ] && [ -e "$moved" ]; then
    echo "state-guard: every slurmctld $source had stopped before ($moved)"
  else
    all_stopped
    if [ -n "$peers" ]; then : > "$moved"; fi
  fi
  if [ -e "$dir/statesave-$source.sha256" ]; then
    echo "state-guard: $dir/statesave-$source exists (taken before the conversion); kept as it is"
  else
    sh -c "$snapshot"
  fi
  echo "state-guard: slurmctld $release converts the state of $source"
else
  if [ ! -e "$dir/statesave-$release.sha256" ]; then
    if [ -z "$announced" ]; then
      how="; to go back to the copy taken when the upgrade started, say so: slurm: {version: \"$release\", upgradeFrom: \"$release\"}"
    else
      how=""
    fi
    echo "state-guard: $state was written by Slurm $by, newer than this slurmctld ($release) in $files, and $dir holds no copy taken on $release (statesave-$release): slurmctld $release can't read it; set slurm.version back to the newer release$how" >&2
    exit 1
  fi
  kept=$(next_job "$copy/job_state")
  now=$(next_job "$file")
  lost=""
  if [ -z "$kept" ] || [ -z "$now" ]; then
    lost="the next job id of $copy/job_state or of $file can't be read, so the jobs restoring the copy would lose can't be told"
  elif [ "$kept" != "$now" ]; then
    lost="jobs were submitted after the copy was taken (saved $(saved_at "$copy/job_state")): the next job id is $now in $state and $kept in the copy, so restoring it loses every job from $kept on"
  fi
  if [ -n "$lost" ] && [ "$accept_loss" != yes ]; then
    echo "state-guard: not restoring $copy: $lost. Keep slurm.version at the newer release ($by), or accept the loss: slurm.acceptJobLoss: true (docs/upgrading.md)" >&2
    exit 1
  fi
  if [ -n "$lost" ]; then echo "state-guard: $lost; slurm.acceptJobLoss is set: restoring all the same"; fi
  echo "state-guard: $state was written by Slurm $by, newer than this slurmctld in $files: the copy taken on $release goes back"
  all_stopped
  : > "$marker"
  sh -c "$restore"
  set_aside
fi

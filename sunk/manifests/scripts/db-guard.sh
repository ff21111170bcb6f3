#!/bin/sh
# slurmdbd's pod while slurm.upgradeFrom is set: the database guard (sunk/dbguard.py decides,
# sunk/manifests/upgrade.py renders; docs/upgrading.md). Run from the mariadb image, beside
# the backup volume. It measures what it sees (the dump, the database's schema against the
# record taken before the dump, the markers slurmdbd's start script writes), looks the state up
# in the table its render filled in from sunk.dbguard.plan, and does what the table says (`db`:
# accounting-db.sh, its action given as its argument). mode:
#   start    once, before slurmdbd starts: the dump and its record, or the refusal
#   watch    once: after a failed conversion, the restore
#   sidecar  start, then `ready` is written (the container's startup probe), then watch every
#            `period` seconds for as long as the pod runs. Restarted within its pod (`ready`
#            there already, in the pod's emptyDir), it skips start: slurmdbd may be converting
#            right now, and start would take the moved schema for an interrupted conversion
set -eu
mode=@MODE@
dir=@DIR@
name=@NAME@
period=@PERIOD@
ready=@READY@
start_table=@START_TABLE@
start_messages=@START_MESSAGES@
watch_table=@WATCH_TABLE@
watch_messages=@WATCH_MESSAGES@
db=@DB@
base="$dir/$name"

flag() { if [ -e "$1" ]; then echo 1; else echo 0; fi; }

state() {
  now=$(sh -c "$db" accounting-db schema)
  if [ "$now" = none ]; then
    compared=none
  elif [ ! -s "$base.schema" ]; then
    compared=unrecorded
  elif [ "$now" = "$(cat "$base.schema")" ]; then
    compared=same
  else
    compared=other
  fi
  echo "$(flag "$base.sql.sha256")-$compared-$(flag "$base.failed")-$(flag "$base.restored")-$(flag "$base.served")"
}

do_restore() {
  sh -c "$db" accounting-db restore
  now=$(sh -c "$db" accounting-db schema)
  if [ -s "$base.schema" ] && [ "$now" != "$(cat "$base.schema")" ]; then
    echo "db-guard: the restored database's schema ($now) is not the one recorded before the dump ($(cat "$base.schema"))" >&2
    exit 1
  fi
  echo "db-guard: the database's schema is the one recorded before the dump ($now)"
  if [ -e "$base.failed" ]; then
    { cat "$base.failed"; echo "restored from $base.sql at $(date -u +%Y-%m-%dT%H:%M:%SZ)"; } > "$base.restored"
  fi
}

set_aside() {
  aside="$base.aside-$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$aside"
  for suffix in sql sql.sha256 schema failed restored served; do
    if [ -e "$base.$suffix" ]; then mv "$base.$suffix" "$aside/"; fi
  done
  echo "db-guard: the dump, its record and the markers set aside in $aside"
}

# `decide TABLE MESSAGES`: the state's row of the table, done.
decide() {
  key=$(state)
  row=$(printf '%s\n' "$1" | grep "^$key " || true)
  if [ -z "$row" ]; then
    echo "db-guard: state $key is not in the table" >&2
    exit 1
  fi
  acts=$(echo "$row" | cut -d' ' -f2)
  said=$(printf '%s\n' "$2" | grep "^$(echo "$row" | cut -d' ' -f3) " | cut -d' ' -f2-)
  refuse=no
  for act in $(echo "$acts" | tr ',' ' '); do
    case "$act" in
      record)
        sh -c "$db" accounting-db schema > "$base.schema.partial"
        mv "$base.schema.partial" "$base.schema"
        echo "db-guard: schema before the conversion: $(cat "$base.schema")" ;;
      dump) sh -c "$db" accounting-db backup ;;
      restore) do_restore ;;
      set-aside) set_aside ;;
      refuse) refuse=yes ;;
      -) ;;
      *) echo "db-guard: unknown action $act" >&2; exit 2 ;;
    esac
  done
  if [ "$refuse" = yes ]; then
    echo "db-guard: $said" >&2
    exit 1
  fi
  if [ -n "$said" ]; then echo "db-guard: $said"; fi
}

mkdir -p "$dir"
case "$mode" in
  start) decide "$start_table" "$start_messages" ;;
  watch) decide "$watch_table" "$watch_messages" ;;
  sidecar)
    if [ ! -e "$ready" ]; then
      decide "$start_table" "$start_messages"
      touch "$ready"
    fi
    while :; do
      sleep "$period"
      decide "$watch_table" "$watch_messages"
    done ;;
  *) echo "db-guard: unknown mode $mode" >&2; exit 2 ;;
esac

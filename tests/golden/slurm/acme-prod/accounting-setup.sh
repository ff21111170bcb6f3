#!/bin/sh
# Rendered by sunk: makes accounting's QOS match the spec (edits, cleared fields, removals).
set -eu
exists() { sacctmgr -n -P show qos format=name | grep -qx "$1"; }
exists low || sacctmgr -i add qos low
exists high || sacctmgr -i add qos high
sacctmgr -i modify qos where name=low set Description=sunk-managed Priority=10 PreemptMode=requeue MaxWall=-1 UsageFactor=0.5 Preempt=
sacctmgr -i modify qos where name=high set Description=sunk-managed Priority=10000 PreemptMode=cluster MaxWall=3-00:00:00 UsageFactor=1 Preempt=
sacctmgr -i modify qos where name=high set Preempt=low
sacctmgr -i modify account where name=root set QOS+=normal,low,high
# QOS marked sunk-managed that the spec no longer lists: off the root account, then deleted.
sacctmgr -n -P show qos format=name,description | awk -F'|' '$2 == "sunk-managed" {print $1}' |
while read -r q; do
  case " low high " in *" $q "*) continue ;; esac
  sacctmgr -i modify account where name=root set QOS-="$q"
  sacctmgr -i delete qos "$q"
done

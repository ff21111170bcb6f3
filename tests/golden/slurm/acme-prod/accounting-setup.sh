#!/bin/sh
# Rendered by sunk: makes accounting's QOS, accounts and users match the spec
# (edits, cleared fields, removals of what sunk created).
set -eu
cluster=research
wanted_qos='low high serving'
wanted_accounts=serving
wanted_pairs='root:slurm serving:slurm'
qos_exists() { sacctmgr -n -P show qos format=name | grep -qx "$1"; }
assoc_exists() {
  sacctmgr -n -P show assoc where cluster="$cluster" account="$1" user="$2" format=account,user | grep -qx "$1|$2"
}
parent_of() {
  sacctmgr -n -P show assoc where cluster="$cluster" account="$1" format=user,parentname | awk -F'|' '$1 == "" {print $2}'
}

# QOS
qos_exists low || sacctmgr -i add qos low
qos_exists high || sacctmgr -i add qos high
qos_exists serving || sacctmgr -i add qos serving
# QOS limits name gres/gpu, which exists once slurmctld has registered (it may still be
# waiting for the QOS created above: a partition's QOS).
tries=0
while :; do
  tres=$(sacctmgr -n -P show tres format=type,name)
  printf '%s\n' "$tres" | grep -qx 'gres|gpu' && break
  tries=$((tries + 1)); [ "$tries" -le 120 ] || { echo "gres/gpu never appeared in slurmdbd" >&2; exit 1; }
  echo 'waiting for slurmctld to register gres/gpu'; sleep 5
done
sacctmgr -i modify qos where name=low set Description=sunk-managed Priority=10 PreemptMode=requeue MaxWall=-1 UsageFactor=0.5 Flags=DenyOnLimit MaxTRESPerJob=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxTRESPerUser=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxTRESPerAccount=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 GrpTRES=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxJobsPerUser=-1 MaxSubmitJobsPerUser=-1 Preempt=
sacctmgr -i modify qos where name=high set Description=sunk-managed Priority=10000 PreemptMode=cluster MaxWall=3-00:00:00 UsageFactor=1 Flags=DenyOnLimit MaxTRESPerJob=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxTRESPerUser=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxTRESPerAccount=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 GrpTRES=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxJobsPerUser=-1 MaxSubmitJobsPerUser=-1 Preempt=
sacctmgr -i modify qos where name=serving set Description=sunk-managed Priority=100 PreemptMode=cluster MaxWall=-1 UsageFactor=1 Flags=DenyOnLimit MaxTRESPerJob=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxTRESPerUser=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 MaxTRESPerAccount=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1 GrpTRES=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=64 MaxJobsPerUser=-1 MaxSubmitJobsPerUser=-1 Preempt=
sacctmgr -i modify qos where name=high set Preempt=low
sacctmgr -i modify account where name=root set QOS+=normal,low,high,serving

# Accounts, parents first
assoc_exists serving "" || sacctmgr -i add account serving cluster="$cluster" Description=sunk-managed Parent=root
# (`modify ... set Parent=` to the parent it has fails: only moves are applied.)
[ "$(parent_of serving)" = root ] || sacctmgr -i modify account where name=serving cluster="$cluster" set Parent=root

# Users (the runtime's Slurm user on root and every account)
assoc_exists root slurm || sacctmgr -i add user slurm account=root cluster="$cluster"
assoc_exists serving slurm || sacctmgr -i add user slurm account=serving cluster="$cluster"
sacctmgr -i modify account where name=serving cluster=research set Fairshare=1 QOS=serving,low
sacctmgr -i modify account where name=serving cluster=research set DefaultQOS=serving
sacctmgr -i modify user where name=slurm cluster=research set DefaultAccount=root

# Associations in the spec's accounts and those marked sunk-managed that the spec no longer lists: other
# accounts first, then default accounts (Slurm refuses to remove a default while others remain).
marked=$(sacctmgr -n -P show account format=account,description | awk -F'|' '$2 == "sunk-managed" {print $1}' | tr '\n' ' ')
defaults=$(sacctmgr -n -P show user format=user,defaultaccount | tr '\n' ' ')
drop_users() {
  sacctmgr -n -P show assoc where cluster="$cluster" format=account,user |
  while IFS='|' read -r a u; do
    [ -n "$u" ] || continue
    case " $marked $wanted_accounts " in *" $a "*) ;; *) continue ;; esac
    case " $wanted_pairs " in *" $a:$u "*) continue ;; esac
    case " $defaults " in *" $u|$a "*) is_default=yes ;; *) is_default=no ;; esac
    [ "$is_default" = "$1" ] || continue
    sacctmgr -i delete user name="$u" account="$a" cluster="$cluster"
  done
}
drop_users no
drop_users yes
# Accounts marked sunk-managed that the spec no longer lists (refused while they have jobs).
dropped=''
for a in $marked; do
  case " $wanted_accounts " in *" $a "*) continue ;; esac
  if assoc_exists "$a" ""; then dropped="${dropped:+$dropped,}$a"; fi
done
# An account someone else made under a dropped one would be left with a parent that is gone
# (measured on 24.11): refused, saying which, rather than orphaned.
for a in $(echo "$dropped" | tr , " "); do
  for k in $(sacctmgr -n -P show assoc where cluster="$cluster" format=account,parentname,user | awk -F"|" -v p="$a" '$2 == p && $3 == "" {print $1}'); do
    case ",$dropped," in *",$k,"*) continue ;; esac
    echo "account $a: account $k, which sunk does not manage, is under it; move $k (sacctmgr modify account $k set parent=...) or keep $a in the spec" >&2
    exit 1
  done
done
[ -z "$dropped" ] || sacctmgr -i delete account name="$dropped" cluster="$cluster"

# QOS marked sunk-managed that the spec no longer lists: off the root account, then deleted.
sacctmgr -n -P show qos format=name,description | awk -F'|' '$2 == "sunk-managed" {print $1}' |
while read -r q; do
  case " $wanted_qos " in *" $q "*) continue ;; esac
  sacctmgr -i modify account where name=root set QOS-="$q"
  sacctmgr -i delete qos "$q"
done

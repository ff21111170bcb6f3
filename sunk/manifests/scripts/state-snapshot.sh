#!/bin/sh
# A copy of StateSaveLocation before slurmctld moves to a new Slurm release, with a sha256 of
# every file, taken while slurmctld is stopped (docs/upgrading.md). The copy is renamed into
# place only once its checksums match the originals. The controllers' lock (LOCK, which the
# state-guard holds while this runs: slurmctld-start.sh) is not state: it is neither copied nor summed.
set -eu
state=@STATE@
dir=@DIR@
name=@NAME@
lock=@LOCK@
umask 077
mkdir -p "$dir"
partial="$dir/.$name.partial"
rm -rf "$partial"
mkdir "$partial"
cp -a "$state/." "$partial/"
rm -f "$partial/$lock"
(cd "$state" && find . -type f ! -path "./$lock" -print0 | sort -z | xargs -0 -r sha256sum) > "$dir/.$name.sha256"
(cd "$partial" && sha256sum -c --quiet "$dir/.$name.sha256")
mv "$partial" "$dir/$name"
mv "$dir/.$name.sha256" "$dir/$name.sha256"
echo "state-snapshot: $(wc -l < "$dir/$name.sha256") files of $state in $dir/$name"

#!/bin/sh
# The accounting database's dump before slurmdbd moves to a new Slurm release (the backup Job,
# sunk/manifests/upgrade.py; docs/upgrading.md). Run from the mariadb image (mariadb-dump).
# Writes <dir>/<name>.sql and <name>.sql.sha256; a dump is renamed into place only once complete,
# so a file with that name is always a whole dump.
set -eu
host=@HOST@
port=@PORT@
database=@DATABASE@
user=@USER@
password_file=@PASSWORD_FILE@
dir=@DIR@
name=@NAME@
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The password reaches mariadb-dump through a private options file, never its command line.
{ printf '[client]\n'; printf 'password=%s\n' "$(cat "$password_file")"; } > "$work/client.cnf"
mkdir -p "$dir"
partial="$dir/.$name.sql.partial"
mariadb-dump --defaults-extra-file="$work/client.cnf" --host="$host" --port="$port" --user="$user" \
  --single-transaction --routines --triggers --databases "$database" > "$partial"
# mariadb-dump ends a complete dump with this line; a dump cut short (disk full, killed) lacks it.
if ! tail -n 1 "$partial" | grep -q '^-- Dump completed'; then
  echo "db-backup: $partial is incomplete (no closing line)" >&2
  exit 1
fi
mv "$partial" "$dir/$name.sql"
(cd "$dir" && sha256sum "$name.sql" > "$name.sql.sha256")
echo "db-backup: $dir/$name.sql $(wc -c < "$dir/$name.sql") bytes, sha256 $(cut -d' ' -f1 "$dir/$name.sql.sha256")"

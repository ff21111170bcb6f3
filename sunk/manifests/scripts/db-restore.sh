#!/bin/sh
# Puts the accounting database back as db-backup.sh dumped it (docs/upgrading.md: going back
# after a failed slurmdbd conversion). slurmdbd must be stopped. Run from the mariadb image.
set -eu
host=@HOST@
port=@PORT@
database=@DATABASE@
user=@USER@
password_file=@PASSWORD_FILE@
dir=@DIR@
name=@NAME@
umask 077
(cd "$dir" && sha256sum -c --quiet "$name.sql.sha256") || {
  echo "db-restore: $dir/$name.sql does not match its checksum; not restoring it" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{ printf '[client]\n'; printf 'password=%s\n' "$(cat "$password_file")"; } > "$work/client.cnf"
client() { mariadb --defaults-extra-file="$work/client.cnf" --host="$host" --port="$port" --user="$user" "$@"; }
# Whatever a failed conversion left (new tables, altered ones) goes with the database.
client -e "DROP DATABASE IF EXISTS \`$database\`"
# The dump was made with --databases: it creates the database and selects it itself.
client < "$dir/$name.sql"
echo "db-restore: $database restored from $dir/$name.sql"

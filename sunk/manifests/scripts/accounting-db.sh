#!/bin/sh
# The accounting database's dump before slurmdbd moves to a new Slurm release, and its restore
# (sunk/manifests/upgrade.py; docs/upgrading.md). Run from the mariadb image (mariadb-dump,
# mariadb). action:
#   backup       writes <dir>/<name>.sql and <name>.sql.sha256; a dump is renamed into place
#                only once complete, so a file with that name is always a whole dump
#   backup-once  the same, unless that dump exists already: slurmdbd's pod runs it at each start
#                while an upgrade is under way, and the dump taken before the conversion must
#                never be replaced by one of the converted database
#   restore      the database dropped and loaded from the dump, once its checksum matches
#                (slurmdbd must be stopped)
#   schema       prints the database's schema: `<convert version>:<digest of the table
#                definitions slurmdbd recorded>` (sunk/dbguard.py says why both), or `none`
#                where slurmdbd has created no tables yet
#   release      prints the release that last ran on the database: `release <X>` from sunk's
#                table sunk_release, else `protocol <rpc_version>` of the slurmctld that
#                registered last (cluster_table), else `none`
#   mark X       records release X in sunk_release (created where missing; one row)
#   ping         exits 0 once the database server answers
set -eu
action=@ACTION@
host=@HOST@
port=@PORT@
database=@DATABASE@
user=@USER@
password_file=@PASSWORD_FILE@
dir=@DIR@
name=@NAME@
# `argument`: the action is the first argument (db-guard.sh runs one copy of this script each way).
if [ "$action" = argument ]; then action=$1; fi
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The password reaches the clients through a private options file, never their command line.
{ printf '[client]\n'; printf 'password=%s\n' "$(cat "$password_file")"; } > "$work/client.cnf"
# `connected mariadb-dump ...`: the client named, connected as slurmdbd connects.
connected() {
  client=$1
  shift
  "$client" --defaults-extra-file="$work/client.cnf" --host="$host" --port="$port" --user="$user" "$@"
}

backup() {
  mkdir -p "$dir"
  partial="$dir/.$name.sql.partial"
  # No `ALTER TABLE ... DISABLE KEYS` lines (InnoDB ignores them): the restore then needs no ALTER
  # grant, which a failed conversion may be about (the drill revokes it).
  connected mariadb-dump --single-transaction --routines --triggers --skip-disable-keys --databases "$database" > "$partial"
  # mariadb-dump ends a complete dump with this line; a dump cut short (disk full, killed) lacks it.
  if ! tail -n 1 "$partial" | grep -q '^-- Dump completed'; then
    echo "db-backup: $partial is incomplete (no closing line)" >&2
    exit 1
  fi
  mv "$partial" "$dir/$name.sql"
  (cd "$dir" && sha256sum "$name.sql" > "$name.sql.sha256")
  echo "db-backup: $dir/$name.sql $(wc -c < "$dir/$name.sql") bytes, sha256 $(cut -d' ' -f1 "$dir/$name.sql.sha256")"
}

restore() {
  (cd "$dir" && sha256sum -c --quiet "$name.sql.sha256") || {
    echo "db-restore: $dir/$name.sql does not match its checksum; not restoring it" >&2
    exit 1
  }
  # Whatever a failed conversion left (new tables, altered ones) goes with the database.
  connected mariadb -e "DROP DATABASE IF EXISTS \`$database\`"
  # The dump was made with --databases: it creates the database and selects it itself.
  connected mariadb < "$dir/$name.sql"
  echo "db-restore: $database restored from $dir/$name.sql"
}

schema() {
  found=$(connected mariadb -N -B -e "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$database' AND table_name IN ('convert_version_table', 'table_defs_table')")
  if [ "$found" != 2 ]; then
    echo none
    return
  fi
  connected mariadb -N -B "$database" -e "SELECT CONCAT(IFNULL((SELECT MAX(version) FROM convert_version_table), 0), ':', IFNULL((SELECT MD5(GROUP_CONCAT(table_name, ' ', MD5(definition) ORDER BY table_name SEPARATOR ' ')) FROM table_defs_table), '-'))"
}

has_table() {
  [ "$(connected mariadb -N -B -e "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$database' AND table_name = '$1'")" = 1 ]
}

release() {
  if has_table sunk_release; then
    ran=$(connected mariadb -N -B "$database" -e "SELECT slurm_release FROM sunk_release WHERE id = 1")
    if [ -n "$ran" ]; then
      echo "release $ran"
      return
    fi
  fi
  if has_table cluster_table; then
    rpc=$(connected mariadb -N -B "$database" -e "SELECT IFNULL(MAX(rpc_version), 0) FROM cluster_table WHERE deleted = 0")
    if [ "${rpc:-0}" -gt 0 ]; then
      echo "protocol $rpc"
      return
    fi
  fi
  echo none
}

# The release is one of sunk's (the spec allows no other): no quoting beyond the SQL literal.
mark() {
  connected mariadb "$database" -e "CREATE TABLE IF NOT EXISTS sunk_release (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, slurm_release VARCHAR(16) NOT NULL, since BIGINT UNSIGNED NOT NULL); INSERT INTO sunk_release (id, slurm_release, since) VALUES (1, '$1', UNIX_TIMESTAMP()) ON DUPLICATE KEY UPDATE since = IF(slurm_release = VALUES(slurm_release), since, VALUES(since)), slurm_release = VALUES(slurm_release)"
}

case "$action" in
  backup) backup ;;
  backup-once)
    if [ -e "$dir/$name.sql.sha256" ]; then
      echo "db-backup: $dir/$name.sql exists (taken before the conversion); kept as it is"
    else
      backup
    fi ;;
  restore) restore ;;
  schema) schema ;;
  release) release ;;
  mark) mark "$2" ;;
  ping) connected mariadb -N -B -e "SELECT 1" > /dev/null 2>&1 ;;
  *) echo "accounting-db: unknown action $action" >&2; exit 2 ;;
esac

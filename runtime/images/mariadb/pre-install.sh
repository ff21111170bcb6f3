# The id the manifests run MariaDB as (runAsUser), fixed before the package would pick one.
groupadd --system --gid 999 mysql
useradd --system --uid 999 --gid 999 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin mysql

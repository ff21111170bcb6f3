# The data folder is a PersistentVolumeClaim, initialised by the entrypoint on first start.
rm -rf /var/lib/mysql/*
install -d -o mysql -g mysql -m 0755 /run/mysqld /var/lib/mysql

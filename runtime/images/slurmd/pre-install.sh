# slurm-wlm-nvml-plugin (gres.conf AutoDetect=nvml) is in Debian's contrib: add contrib to the
# sources the base image was made with (same mirror and suite), for this layer only.
sed -n 's/^deb \([^ ]*\) \([^ ]*\) main$/deb \1 \2 contrib/p' /etc/apt/sources.list > /etc/apt/sources.list.d/contrib.list
test -s /etc/apt/sources.list.d/contrib.list

# pyxis (SPANK plugin) and enroot (container runtime) from NVIDIA's GitHub releases: neither is
# packaged by Debian. Versions match SOURCES in runtime/images/build.py.
enroot=3.5.0
pyxis=0.20.0
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)
cd /tmp || exit
curl -fsSLO "https://github.com/NVIDIA/enroot/releases/download/v${enroot}/enroot_${enroot}-1_${arch}.deb"
curl -fsSLO "https://github.com/NVIDIA/enroot/releases/download/v${enroot}/enroot+caps_${enroot}-1_${arch}.deb"
apt-get -q update >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ./enroot*.deb >/dev/null
curl -fsSL "https://github.com/NVIDIA/pyxis/archive/refs/tags/v${pyxis}.tar.gz" | tar -xz
make -C "pyxis-${pyxis}" >/dev/null
install -D -m 0755 "pyxis-${pyxis}/spank_pyxis.so" "/usr/lib/${triplet}/slurm/spank_pyxis.so"
# The architecture-neutral path plugstack.conf names (sunk.images.SPANK_DIR).
mkdir -p /usr/local/lib/sunk/spank
ln -sf "/usr/lib/${triplet}/slurm/spank_pyxis.so" /usr/local/lib/sunk/spank/spank_pyxis.so
rm -rf /tmp/enroot*.deb "/tmp/pyxis-${pyxis}"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q curl gcc make libc6-dev libslurm-dev >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get autoremove -y -q >/dev/null
rm -rf /var/lib/apt/lists/* /var/cache/apt/*

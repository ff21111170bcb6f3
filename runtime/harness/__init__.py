"""Local real-Slurm harness: the image package set in a chroot, daemons from rendered files."""

#!/bin/sh
ls /sys/class/infiniband/* >/dev/null 2>&1 || { echo "no InfiniBand device"; exit 1; }

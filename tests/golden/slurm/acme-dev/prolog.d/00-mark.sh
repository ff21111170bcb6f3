#!/bin/sh
# Leaves a trace so operators can see prologs run.
echo "prolog job=$SLURM_JOB_ID" >> /tmp/sunk-prolog.log

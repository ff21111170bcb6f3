#!/bin/sh
# slurmctld (as the slurm user, in the controller pod) after every job.
echo "job=$SLURM_JOB_ID exit=$SLURM_JOB_EXIT_CODE" >> /tmp/sunk-jobs-ended.log

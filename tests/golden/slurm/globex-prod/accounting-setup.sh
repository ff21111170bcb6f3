#!/bin/sh
# Rendered by sunk: creates the spec's QOS in accounting. Idempotent.
sacctmgr -i add qos low Priority=10 || true
sacctmgr -i add qos high Priority=1000 || true
sacctmgr -i modify qos where name=high set Preempt=low || true
sacctmgr -i modify account where name=root set QOS+=normal,low,high || true

#!/bin/sh
# lsmod STAND-IN for the nodeconverge local lab: prints the node's loaded modules, which the modprobe
# stand-in keeps in $NODE/proc/modules (see lab/modprobe.sh), in kmod's lsmod format. lab.sh installs it
# as /usr/local/sbin/lsmod inside each node with @NODE@ replaced by the node's directory on the host.
set -u
NODE=@NODE@
awk 'BEGIN { printf "%-19s %8s  %s\n", "Module", "Size", "Used by" }
	{ u = ($4 == "-" ? "" : $4); sub(/,$/, "", u); printf "%-19s %8s  %s", $1, $2, $3; if (u != "") printf " %s", u; printf "\n" }' "$NODE/proc/modules"

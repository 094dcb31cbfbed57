#!/bin/sh
# journalctl STAND-IN for the nodeconverge local lab (systemd cannot run as PID 1 here, so there is no
# journal). Understands `journalctl -u containerd [-n N] [--no-pager] [-b] [--since ...]` and prints the
# tail of the containerd log that the systemctl stand-in writes. Installed by lab.sh as
# /usr/local/sbin/journalctl with @NODE@ replaced by the node's directory on the host.
set -u
NODE=@NODE@
n=50
unit=
while [ $# -gt 0 ]; do
	case $1 in
	-u | --unit) unit=${2:-}; shift ;;
	-u*) unit=${1#-u} ;;
	--unit=*) unit=${1#--unit=} ;;
	-n | --lines) n=${2:-50}; shift ;;
	-n*) n=${1#-n} ;;
	--lines=*) n=${1#--lines=} ;;
	--since | --until) shift ;;
	*) ;;
	esac
	shift
done
case $unit in
containerd | containerd.service) ;;
*)
	echo "-- No entries --"
	exit 0
	;;
esac
if [ -r "$NODE/containerd.log" ]; then
	tail -n "$n" "$NODE/containerd.log"
else
	echo "-- No entries --"
fi

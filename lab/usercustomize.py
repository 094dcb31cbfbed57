# /proc/modules STAND-IN for the nodeconverge local lab's Python (installed by lab.sh as root's
# usercustomize.py inside each node, with @NODE@ replaced by the node's directory on the host).
#
# The lab nodes share this machine's kernel. A kernel with loadable modules has /proc/modules, and
# lab.sh bind-mounts the node's own list over it; this machine's kernel has none, so there is no file to
# mount over. The node's modprobe stand-in (lab/modprobe.sh) keeps the node's list in @NODE@/proc/modules,
# and this hook makes Python's open() read that list when a program on the node opens /proc/modules and
# the kernel has no such file. It is what lets Ansible's own modprobe module (community.general) run
# unchanged on a lab node. Nothing else is changed.
import builtins as _builtins
import os as _os

_open = _builtins.open
_LIST = '@NODE@/proc/modules'


def _lab_open(file, *args, **kwargs):
    if file in ('/proc/modules', b'/proc/modules') and not _os.path.exists('/proc/modules'):
        file = _LIST
    return _open(file, *args, **kwargs)


_builtins.open = _lab_open

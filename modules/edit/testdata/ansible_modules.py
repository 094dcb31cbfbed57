"""Runs Ansible's own module code on a list of tasks in one process.

Each entry of the JSON list in argv[1] is {"module": NAME, "args": {...}}:
ansible.modules.NAME's main() runs with those arguments, set the way
Ansible's own unit tests set them (module_utils.basic._ANSIBLE_ARGS), and
what it prints (its exit_json/fail_json) is collected. The list of results
goes to stdout as JSON. It is the real module, minus the fork and the
connection per task, so a test can compare hundreds of cases in a second.
"""
import contextlib
import importlib
import io
import json
import sys

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

cases = json.load(open(sys.argv[1]))
tmp = sys.argv[2]
out = []
for c in cases:
    args = dict(c['args'])
    args.update({'_ansible_tmpdir': tmp, '_ansible_remote_tmp': tmp, '_ansible_keep_remote_files': False,
                 '_ansible_check_mode': bool(c.get('check')), '_ansible_diff': False})
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
    mod = importlib.import_module(c.get('package', 'ansible.modules') + '.' + c['module'])
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            mod.main()
    except SystemExit:
        pass
    out.append(json.loads(buf.getvalue()))
json.dump(out, sys.stdout)

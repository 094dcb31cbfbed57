# Evaluates host patterns with Ansible's own InventoryManager, the calls
# `ansible PATTERN -i SOURCE... -l LIMIT --list-hosts` makes: subset(limit)
# then get_hosts(pattern). Reads {"sources": [...], "cases": [{"pattern",
# "limit"}]} on stdin, writes one {"hosts": [...]} or {"error": "..."} per
# case. Run by TestPatternsMatchAnsible with ansible's own interpreter.
import json
import sys

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

req = json.load(sys.stdin)
inv = InventoryManager(loader=DataLoader(), sources=req["sources"])
out = []
for case in req["cases"]:
    try:
        inv.subset(case.get("limit"))
        out.append({"hosts": [h.name for h in inv.get_hosts(case["pattern"])]})
    except Exception as e:  # an AnsibleError is the answer for this case
        out.append({"error": str(e)})
json.dump(out, sys.stdout)

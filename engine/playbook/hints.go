package playbook

import "strings"

// What nodeconverge says about the parts of Ansible it does not run, so a
// playbook written for Ansible fails with one list of what to change and,
// where there is one, the nodeconverge way to say it.

// wholeFile is the answer for every module that edits part of a file.
const wholeFile = "not supported: nodeconverge owns whole files; use copy (content or src) or template with the whole file"

const packages = "not supported: nodeconverge does not manage packages; install them in the node image, or run the package tool with command and a creates: guard"

// moduleHints maps Ansible module names (short, without a collection) that
// nodeconverge does not have to what to use instead.
var moduleHints = map[string]string{
	"ini_file":         wholeFile,
	"xml":              wholeFile,
	"apt":              packages,
	"yum":              packages,
	"dnf":              packages,
	"package":          packages,
	"pip":              packages,
	"snap":             packages,
	"zypper":           packages,
	"apt_key":          packages,
	"apt_repository":   packages,
	"yum_repository":   packages,
	"rpm_key":          packages,
	"sysvinit":         "not supported: nodeconverge drives systemd; use service or systemd",
	"mount":            "not supported: nodeconverge does not manage mounts; write the unit or fstab whole with copy",
	"user":             "not supported: nodeconverge does not manage users",
	"group":            "not supported: nodeconverge does not manage groups",
	"get_url":          "not supported: nodeconverge does not download; put the file beside the playbook and use copy with src",
	"uri":              "not supported: nodeconverge does not make HTTP requests",
	"unarchive":        "not supported: unpack on the controller and use copy, or run tar with command and a creates: guard",
	"git":              "not supported: nodeconverge does not check out repositories",
	"pause":            "not supported: nodeconverge does not wait on a timer",
	"wait_for":         "not supported: nodeconverge does not wait on a timer; a module checks what it needs",
	"setup":            "not supported as a task: facts are gathered by the play (gather_facts, gather_subset), in each host's first round trip",
	"gather_facts":     "not supported as a task: facts are gathered by the play (gather_facts, gather_subset), in each host's first round trip",
	"reboot":           "not supported: nodeconverge does not reboot nodes",
	"raw":              "not supported: use command (argv, no shell) or shell",
	"script":           "not supported: copy the script to the node and run it with command",
	"fetch":            "not supported: nodeconverge does not fetch files to the controller",
	"synchronize":      "not supported: use copy for each file",
	"import_playbook":  "not supported: give each playbook on the command line (nodeconverge apply -i INV A.yaml B.yaml)",
	"cron":             "not supported: write the cron file whole with copy under /etc/cron.d",
	"authorized_key":   "not supported: write the authorized_keys file whole with copy",
	"kernel_blacklist": "not supported: write /etc/modprobe.d/NAME.conf with copy",
	"selinux":          "not supported",
	"ufw":              "not supported",
	"firewalld":        "not supported",
	"iptables":         "not supported",
	"hostname":         "not supported: write /etc/hostname with copy",
	"timezone":         "not supported",
}

// taskKeywordHints maps Ansible task keywords nodeconverge does not run to
// what to do instead.
var taskKeywordHints = map[string]string{
	"rescue":             "not supported on a task: only a block takes it (block: with the tasks, then rescue:)",
	"always":             "not supported on a task: only a block takes it (block: with the tasks, then always:)",
	"delegate_to":        "not supported: every task runs on the host it converges",
	"delegate_facts":     "not supported: nodeconverge does not gather facts",
	"local_action":       "not supported: every task runs on the host it converges",
	"run_once":           "not supported: every task runs on every host of the play; limit the play with hosts:",
	"async":              "not supported: a task's deadline is its timeout:",
	"poll":               "not supported: a task's deadline is its timeout:",
	"diff":               "not supported: diffs are chosen for the whole run (--diff)",
	"any_errors_fatal":   "not supported: use max_fail_percentage: 0 on the play",
	"remote_user":        "not supported on a task: set ansible_user in the inventory",
	"connection":         "not supported: nodeconverge connects over SSH",
	"module_defaults":    "not supported: give each task its arguments",
	"collections":        "not supported: name modules by their short name or ansible.builtin.NAME",
	"throttle":           "not supported: use --forks or serial on the play",
	"vars_files":         "not supported on a task",
	"debugger":           "not supported",
	"ignore_unreachable": "not supported: an unreachable host leaves the run and is reported",
	"with_list":          "not supported yet: write one task per item",
	"with_fileglob":      "not supported: list the files in loop",
	"with_together":      "not supported: use loop over a list of mappings",
	"with_nested":        "not supported: use loop over a list of mappings",
	"with_sequence":      "not supported: use loop over a list",
}

// playKeywordHints maps Ansible play keywords nodeconverge does not run to
// what to do instead.
var playKeywordHints = map[string]string{
	"vars_files":         "not supported: put the values in vars:, group_vars/host_vars, or pass -e @FILE",
	"vars_prompt":        "not supported: pass the value with -e",
	"strategy":           "not supported: nodeconverge runs plays in Ansible's linear order",
	"any_errors_fatal":   "not supported: use max_fail_percentage: 0",
	"remote_user":        "not supported on a play: set ansible_user in the inventory",
	"connection":         "not supported: nodeconverge connects over SSH",
	"module_defaults":    "not supported: give each task its arguments",
	"collections":        "not supported: name modules by their short name or ansible.builtin.NAME",
	"order":              "not supported: hosts run in inventory order",
	"force_handlers":     "not supported: owed handlers are recorded on the node and run by the next run",
	"ignore_unreachable": "not supported: an unreachable host leaves the run and is reported",
	"import_playbook":    "not supported: give each playbook on the command line (nodeconverge apply -i INV A.yaml B.yaml)",
	"diff":               "not supported: diffs are chosen for the whole run (--diff)",
	"become_method":      "not supported: nodeconverge becomes root with sudo -n",
	"throttle":           "not supported: use --forks or serial",
	"port":               "not supported on a play: set ansible_port in the inventory",
	"become_user":        "not supported on a play: set ansible_become_user in the inventory",
	"tags":               "not supported on a play: tag the tasks",
}

// moduleHint returns what to say about a module name nodeconverge does not
// have, FQCN or not; "" when it knows nothing about it.
func moduleHint(name string) string {
	short := name
	if i := strings.LastIndex(name, "."); i >= 0 {
		short = name[i+1:]
	}
	return moduleHints[short]
}

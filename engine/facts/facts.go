// Package facts is the small set of Ansible facts nodeconverge gathers:
// the names a node-prep play reads to decide what to do (os_family,
// distribution and its version, architecture, kernel, hostname, fqdn,
// machine_id, processor counts, memory), computed from the same sources
// and with the same rules as Ansible's setup module, so a play that reads
// them decides what it decides under ansible-playbook.
//
// The facts are read by one read-only command (Query) that the runner
// adds to the host's first round trip: gathering costs no SSH session of
// its own. Which facts exist is known at load (Known, Subset), so a play
// that reads one outside the set fails before any node is contacted,
// naming it.
package facts

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"nodeconverge/engine/transport"
)

// Subsets of Ansible's gather_subset that hold the facts of the set.
const (
	Distribution = "distribution"
	Platform     = "platform"
	Hardware     = "hardware"
)

// subsetOf maps each fact (without its ansible_ prefix) to the Ansible
// collector that provides it.
var subsetOf = map[string]string{
	"os_family":                  Distribution,
	"distribution":               Distribution,
	"distribution_version":       Distribution,
	"distribution_major_version": Distribution,
	"distribution_minor_version": Distribution,
	"distribution_release":       Distribution,
	"architecture":               Platform,
	"machine":                    Platform,
	"system":                     Platform,
	"kernel":                     Platform,
	"kernel_version":             Platform,
	"hostname":                   Platform,
	"nodename":                   Platform,
	"fqdn":                       Platform,
	"domain":                     Platform,
	"machine_id":                 Platform,
	"processor_count":            Hardware,
	"processor_cores":            Hardware,
	"processor_threads_per_core": Hardware,
	"processor_vcpus":            Hardware,
	"processor_nproc":            Hardware,
	"memtotal_mb":                Hardware,
	"memfree_mb":                 Hardware,
	"swaptotal_mb":               Hardware,
	"swapfree_mb":                Hardware,
}

// Names are the facts of the set, without the ansible_ prefix, sorted.
func Names() []string {
	out := make([]string, 0, len(subsetOf))
	for n := range subsetOf {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Known says whether name (without the ansible_ prefix) is a fact of the
// set, and which subset provides it.
func Known(name string) (subset string, ok bool) {
	s, ok := subsetOf[name]
	return s, ok
}

// Subset is a play's gather_subset read as Ansible reads it, narrowed to
// the subsets that hold facts of the set: which of them are gathered.
type Subset map[string]bool

// ParseSubset reads gather_subset's values: "all" (the default), "min"
// (distribution and platform, among others), a collector's name
// ("hardware"), each negated with "!"; "!all" leaves min, "!all,!min"
// leaves nothing but what is named. An unknown name is an error, as it is
// in Ansible.
func ParseSubset(vals []string) (Subset, error) {
	if len(vals) == 0 {
		vals = []string{"all"}
	}
	add, exclude := map[string]bool{}, map[string]bool{}
	for _, v := range vals {
		v = strings.TrimSpace(v)
		neg := strings.HasPrefix(v, "!")
		v = strings.TrimPrefix(v, "!")
		if !validSubset[v] {
			return nil, fmt.Errorf("gather_subset: %q is not a subset Ansible knows (all, min, hardware, network, virtual, distribution, platform, ...)", v)
		}
		if neg {
			exclude[v] = true
		} else {
			add[v] = true
		}
	}
	out := Subset{}
	if add["all"] || len(add) == 0 && !exclude["all"] {
		for _, s := range []string{Distribution, Platform, Hardware} {
			out[s] = true
		}
	}
	// min is always gathered unless excluded (Ansible adds it to any
	// selection).
	if !exclude["min"] {
		out[Distribution], out[Platform] = true, true
	}
	for _, s := range []string{Distribution, Platform, Hardware} {
		if add[s] {
			out[s] = true
		}
		if exclude[s] {
			delete(out, s)
		}
	}
	return out, nil
}

// validSubset are the names Ansible's gather_subset accepts.
var validSubset = map[string]bool{
	"all": true, "min": true, "hardware": true, "network": true, "virtual": true, "ohai": true, "facter": true,
	"apparmor": true, "caps": true, "chroot": true, "cmdline": true, "date_time": true, "distribution": true,
	"dns": true, "env": true, "fips": true, "local": true, "lsb": true, "pkg_mgr": true, "platform": true,
	"python": true, "selinux": true, "service_mgr": true, "ssh_pub_keys": true, "user": true, "devices": true,
	"dmi": true, "mounts": true, "interfaces": true, "default_ipv4": true, "default_ipv6": true,
	"all_ipv4_addresses": true, "all_ipv6_addresses": true, "loadavg": true, "systemd": true,
}

// Query is the read-only command that reads every fact of the set, in
// the host's first round trip. Its output is data (Parse reads it); the
// script itself is constant.
func Query() transport.Query {
	return transport.Query{Cmds: []transport.Cmd{{Script: script}}}
}

// script prints each source after a marker line. socket.getfqdn() is
// what Ansible's fqdn is; python3 gives it where Ansible would run, and
// `hostname -f` where there is no python3.
const script = `printf '@os\n'; cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null
printf '@debian\n'; cat /etc/debian_version 2>/dev/null
printf '@uname\n'; uname -s; uname -m; uname -r; uname -n; uname -v
printf '@fqdn\n'; python3 -c 'import socket; print(socket.getfqdn())' 2>/dev/null || hostname -f 2>/dev/null || uname -n
printf '@machineid\n'; cat /var/lib/dbus/machine-id 2>/dev/null || cat /etc/machine-id 2>/dev/null
printf '@nproc\n'; nproc 2>/dev/null
printf '@meminfo\n'; cat /proc/meminfo 2>/dev/null
printf '@cpuinfo\n'; cat /proc/cpuinfo 2>/dev/null
printf '@end\n'
`

// Parse reads the output of Query's command into the facts, keyed
// without the ansible_ prefix (ansible_facts' shape).
func Parse(out []byte) (map[string]any, error) {
	sec := map[string][]string{}
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "@") && !strings.Contains(line, " ") {
			cur = line[1:]
			continue
		}
		sec[cur] = append(sec[cur], line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read facts: %w", err)
	}
	if _, ok := sec["end"]; !ok && len(sec["uname"]) == 0 {
		return nil, fmt.Errorf("read facts: the node's answer is incomplete")
	}
	f := map[string]any{}
	distribution(f, sec["os"], sec["debian"])
	platform(f, sec["uname"], sec["fqdn"], sec["machineid"])
	hardware(f, sec["meminfo"], sec["cpuinfo"], sec["nproc"], str(f["architecture"]))
	return f, nil
}

func str(v any) string { s, _ := v.(string); return s }

func first(lines []string) string {
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// osRelease reads os-release's KEY=value lines, quotes removed.
func osRelease(lines []string) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok || k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out
}

// distNames are the names Ansible gives the os-release IDs it knows.
var distNames = map[string]string{
	"debian": "Debian", "ubuntu": "Ubuntu", "raspbian": "Debian", "linuxmint": "Linux Mint", "pop": "Pop!_OS",
	"centos": "CentOS", "rhel": "RedHat", "fedora": "Fedora", "rocky": "Rocky", "almalinux": "AlmaLinux",
	"ol": "OracleLinux", "amzn": "Amazon", "sles": "SLES", "sled": "SLED", "opensuse-leap": "openSUSE Leap",
	"opensuse-tumbleweed": "openSUSE Tumbleweed", "arch": "Archlinux", "alpine": "Alpine", "flatcar": "Flatcar",
	"kali": "Kali", "devuan": "Devuan", "openEuler": "openEuler", "photon": "VMware Photon OS",
}

// families is Ansible's OS_FAMILY_MAP, inverted.
var families = func() map[string]string {
	m := map[string][]string{
		"RedHat":    {"RedHat", "Fedora", "CentOS", "Scientific", "SLC", "Ascendos", "CloudLinux", "PSBM", "OracleLinux", "OVS", "OEL", "Amazon", "Virtuozzo", "XenServer", "Alibaba", "EulerOS", "openEuler", "AlmaLinux", "Rocky", "TencentOS", "EuroLinux", "Kylin Linux Advanced Server", "MIRACLE"},
		"Debian":    {"Ubuntu", "Debian", "Raspbian", "Neon", "KDE neon", "Linux Mint", "SteamOS", "Devuan", "Kali", "Cumulus Linux", "Pop!_OS", "Parrot", "Pardus GNU/Linux", "Uos", "Deepin", "OSMC"},
		"Suse":      {"SuSE", "SLES", "SLED", "openSUSE", "openSUSE Tumbleweed", "SLES_SAP", "SUSE_LINUX", "openSUSE Leap", "ALP-Dolomite", "SL-Micro"},
		"Archlinux": {"Archlinux", "Antergos", "Manjaro"},
		"Alpine":    {"Alpine"},
		"Flatcar":   {"Flatcar"},
	}
	out := map[string]string{}
	for fam, ds := range m {
		for _, d := range ds {
			out[d] = fam
		}
	}
	return out
}()

func distribution(f map[string]any, osLines, debian []string) {
	osr := osRelease(osLines)
	id := osr["ID"]
	name, ok := distNames[id]
	if !ok {
		name = "OtherLinux"
		if id != "" {
			name = strings.ToUpper(id[:1]) + id[1:]
		}
	}
	version := osr["VERSION_ID"]
	if name == "Debian" {
		// Ansible (distro, best=True) takes Debian's point release
		// from /etc/debian_version.
		if dv := first(debian); dv != "" && dv[0] >= '0' && dv[0] <= '9' {
			version = dv
		}
	}
	release := osr["VERSION_CODENAME"]
	if release == "" {
		release = osr["UBUNTU_CODENAME"]
	}
	if release == "" {
		if v := osr["VERSION"]; strings.Contains(v, "(") && strings.Contains(v, ")") {
			release = strings.TrimSpace(v[strings.Index(v, "(")+1 : strings.LastIndex(v, ")")])
		}
	}
	if release == "" {
		release = "NA"
	}
	if version == "" {
		version = "NA"
	}
	major, minor := version, ""
	if i := strings.Index(version, "."); i >= 0 {
		major, minor = version[:i], version[i+1:]
		if j := strings.Index(minor, "."); j >= 0 {
			minor = minor[:j]
		}
	}
	fam := families[name]
	if fam == "" {
		fam = name
	}
	f["distribution"], f["os_family"], f["distribution_version"] = name, fam, version
	f["distribution_major_version"], f["distribution_release"] = major, release
	if minor != "" {
		f["distribution_minor_version"] = minor
	}
}

func platform(f map[string]any, uname, fqdn, mid []string) {
	at := func(i int) string {
		if i < len(uname) {
			return strings.TrimSpace(uname[i])
		}
		return ""
	}
	f["system"], f["architecture"], f["machine"], f["kernel"] = at(0), at(1), at(1), at(2)
	node := at(3)
	f["nodename"], f["hostname"], f["kernel_version"] = node, strings.SplitN(node, ".", 2)[0], at(4)
	fq := first(fqdn)
	f["fqdn"] = fq
	domain := ""
	if i := strings.Index(fq, "."); i >= 0 {
		domain = fq[i+1:]
	}
	f["domain"] = domain
	f["machine_id"] = first(mid)
}

func hardware(f map[string]any, mem, cpu, nproc []string, arch string) {
	kb := map[string]int{}
	for _, l := range mem {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		if n, err := strconv.Atoi(fs[0]); err == nil {
			kb[k] = n
		}
	}
	f["memtotal_mb"], f["memfree_mb"] = kb["MemTotal"]/1024, kb["MemFree"]/1024
	f["swaptotal_mb"], f["swapfree_mb"] = kb["SwapTotal"]/1024, kb["SwapFree"]/1024
	// Ansible's LinuxHardware.get_cpu_facts, step for step.
	i, vendor, model, procs := 0, 0, 0, 0
	physid, coreid := "0", "0"
	var sockKeys, coreKeys []string
	sockets, cores := map[string]int{}, map[string]int{}
	for _, l := range cpu {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name", "Processor", "vendor_id", "cpu", "Vendor", "processor":
			switch k {
			case "model name":
				model++
			case "processor":
				procs++
			case "vendor_id":
				vendor++
			}
			i++
		case "physical id":
			physid = v
			if _, ok := sockets[physid]; !ok {
				sockets[physid] = 1
				sockKeys = append(sockKeys, physid)
			}
		case "core id":
			coreid = v
			if _, ok := sockets[coreid]; !ok {
				if _, ok := cores[coreid]; !ok {
					coreKeys = append(coreKeys, coreid)
				}
				cores[coreid] = 1
			}
		case "cpu cores":
			if _, ok := sockets[physid]; !ok {
				sockKeys = append(sockKeys, physid)
			}
			sockets[physid], _ = strconv.Atoi(v)
		case "siblings":
			if _, ok := cores[coreid]; !ok {
				coreKeys = append(coreKeys, coreid)
			}
			cores[coreid], _ = strconv.Atoi(v)
		}
	}
	if vendor > 0 && vendor == model {
		i = vendor
	}
	if strings.HasPrefix(arch, "armv") || strings.HasPrefix(arch, "aarch") || strings.HasPrefix(arch, "ppc") {
		i = procs
	}
	count := i
	if len(sockets) > 0 {
		count = len(sockets)
	}
	coresPer := 1
	if len(sockKeys) > 0 && sockets[sockKeys[0]] != 0 {
		coresPer = sockets[sockKeys[0]]
	}
	threads := 1 / coresPer
	if len(sockKeys) > 0 && len(coreKeys) > 0 && sockets[sockKeys[0]] != 0 {
		threads = cores[coreKeys[0]] / sockets[sockKeys[0]]
	}
	f["processor_count"], f["processor_cores"], f["processor_threads_per_core"] = count, coresPer, threads
	f["processor_vcpus"] = threads * count * coresPer
	n := procs
	if v, err := strconv.Atoi(first(nproc)); err == nil && v > 0 {
		n = v
	}
	f["processor_nproc"] = n
}

// Vars are the facts as a play reads them: each as ansible_<name> and
// all of them under ansible_facts (Ansible's INJECT_FACTS_AS_VARS).
func Vars(f map[string]any) map[string]any {
	out := make(map[string]any, len(f)+1)
	af := make(map[string]any, len(f))
	for k, v := range f {
		out["ansible_"+k] = v
		af[k] = v
	}
	out["ansible_facts"] = af
	return out
}

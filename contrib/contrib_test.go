// Package contrib holds no Go code: its test checks the packaging files
// beside it (systemd units, the Kubernetes manifest) against what they
// drive, so an edit to the playbook or to a flag that breaks them fails here.
package contrib

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/playbook"

	_ "nodeconverge/modules/all"
)

// manifestDocs splits a multi-document YAML file with the Kubernetes
// reader kubectl uses.
func manifestDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := k8syaml.NewYAMLReader(bufio.NewReader(f))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
}

// TestDaemonSetManifest decodes every document of the manifest strictly
// into the Kubernetes API types (an unknown or misplaced field fails), then
// checks what pull mode needs: privileged, the host's PID namespace, the
// node's / mounted where --host-root points, the playbook from the
// ConfigMap equal to the shipped one and loadable, the textfile report on
// the node, and a random delay before each run.
func TestDaemonSetManifest(t *testing.T) {
	var ds *appsv1.DaemonSet
	var cm *corev1.ConfigMap
	for _, doc := range manifestDocs(t, filepath.Join("kubernetes", "nodeconverge-daemonset.yaml")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		var err error
		switch meta.Kind {
		case "": // a document of comments only
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			err = yaml.UnmarshalStrict(doc, ds)
		case "ConfigMap":
			cm = &corev1.ConfigMap{}
			err = yaml.UnmarshalStrict(doc, cm)
		case "Namespace":
			err = yaml.UnmarshalStrict(doc, &corev1.Namespace{})
		default:
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
		if err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if ds == nil || cm == nil {
		t.Fatal("the manifest needs a DaemonSet and a ConfigMap")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Error("hostPID must be true: the node lock reads the controller's pid in the node's /proc")
	}
	if ds.Spec.Selector == nil || ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Error("the selector does not match the pod template's labels")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the container must be privileged (chroot, restarting the node's containerd)")
	}
	script := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	m := regexp.MustCompile(`nodeconverge apply --host-root (\S+)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the container does not run nodeconverge apply --host-root:\n%s", script)
	}
	hostRoot := m[1]
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		if _, ok := volumes[vm.Name]; !ok {
			t.Errorf("volumeMount %s names no volume", vm.Name)
		}
		mounts[vm.MountPath] = vm
	}
	root, ok := mounts[hostRoot]
	if !ok || volumes[root.Name].HostPath == nil || volumes[root.Name].HostPath.Path != "/" {
		t.Errorf("--host-root %s is not a mount of the node's / (hostPath /)", hostRoot)
	}
	// The playbook the pods run is the ConfigMap's key at its mount path.
	pm := regexp.MustCompile(`(/etc/nodeconverge/)(\S+\.yaml)`).FindStringSubmatch(script)
	if pm == nil {
		t.Fatalf("no playbook path in the script:\n%s", script)
	}
	cmMount, ok := mounts[strings.TrimSuffix(pm[1], "/")]
	if !ok || volumes[cmMount.Name].ConfigMap == nil || volumes[cmMount.Name].ConfigMap.Name != cm.Name {
		t.Errorf("%s is not the ConfigMap %s's mount", pm[1], cm.Name)
	}
	body, ok := cm.Data[pm[2]]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, pm[2])
	}
	shipped, err := os.ReadFile(filepath.Join("..", "playbooks", "gpu-containerd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if body != string(shipped) {
		t.Errorf("the ConfigMap's playbook is not playbooks/gpu-containerd.yaml; regenerate its data block with sed 's/^/    /' playbooks/gpu-containerd.yaml")
	}
	pbPath := filepath.Join(t.TempDir(), pm[2])
	if err := os.WriteFile(pbPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := playbook.Load(pbPath); err != nil {
		t.Errorf("the ConfigMap's playbook does not load: %v", err)
	}
	if !strings.Contains(script, "--report prom="+hostRoot+"/") {
		t.Error("the Prometheus report must be written on the node (under --host-root), where node_exporter reads it")
	}
	if !strings.Contains(script, "rand()") {
		t.Error("each run must wait a random delay, or a fleet restarts containerd everywhere at once")
	}
}

// unitExec returns the ExecStart words of a systemd unit, continuation
// lines joined.
func unitExec(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatalf("%s has no ExecStart", path)
	return nil
}

// TestPullUnit: the pull service runs apply on the shipped playbook with
// the inventory beside it, whose one host is reached locally, and the timer
// spreads the fleet's runs.
func TestPullUnit(t *testing.T) {
	words := unitExec(t, filepath.Join("pull", "nodeconverge-pull.service"))
	if len(words) < 2 || words[1] != "apply" {
		t.Fatalf("ExecStart = %v", words)
	}
	var inv, pb string
	for i, w := range words {
		switch {
		case w == "-i" && i+1 < len(words):
			inv = words[i+1]
		case strings.HasSuffix(w, ".yaml") && words[i-1] != "-i":
			pb = w
		}
	}
	if filepath.Base(inv) != "pull-inventory.yaml" || filepath.Base(pb) != "gpu-containerd.yaml" {
		t.Fatalf("ExecStart inventory %q playbook %q", inv, pb)
	}
	i, err := inventory.Load(filepath.Join("pull", "pull-inventory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := i.Select("gpu")
	if err != nil || len(hosts) != 1 || hosts[0].Conn.Connection != "local" {
		t.Fatalf("pull inventory: hosts %v err %v; want one host in gpu with ansible_connection local", hosts, err)
	}
	timer, err := os.ReadFile(filepath.Join("pull", "nodeconverge-pull.timer"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(timer, []byte("RandomizedDelaySec=")) {
		t.Error("the pull timer must randomize its start: a fleet must not restart containerd together")
	}
}

// unitLine returns the value of a unit's first KEY= line, continuation
// lines joined.
func unitLine(t *testing.T, path, key string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return ""
}

// TestDriftUnitPublishesHTML: the nightly check proves every node by pod
// and writes the HTML page with the JSON report and the textfile, with the
// diffs in it, into the unit's
// own state directory, and its ExecStopPost, run here by sh as systemd
// would after unescaping, keeps a dated copy of the page.
func TestDriftUnitPublishesHTML(t *testing.T) {
	unit := "nodeconverge-drift.service"
	words := unitExec(t, unit)
	var html, prom string
	diff, prove := false, false
	for i, w := range words {
		switch {
		case w == "--diff":
			diff = true
		case w == "--prove":
			prove = true
		case w == "--report" && i+1 < len(words):
			kind, path, _ := strings.Cut(words[i+1], "=")
			switch kind {
			case "html":
				html = path
			case "prom":
				prom = path
			}
		}
	}
	if html == "" || prom == "" || !diff || !prove {
		t.Fatalf("ExecStart %v: want --diff, --prove (issue 26: a broken runtime shows up the next morning), --report html= and --report prom=", words)
	}
	if state := unitLine(t, unit, "StateDirectory"); !strings.Contains(" "+state+" ", " nodeconverge/report ") || filepath.Dir(html) != "/var/lib/nodeconverge/report" {
		t.Fatalf("the page %s must be in the unit's StateDirectory nodeconverge/report (have %q): nothing else is writable", html, state)
	}
	post := unitLine(t, unit, "ExecStopPost")
	script, ok := strings.CutPrefix(post, "/bin/sh -c '")
	if !ok || !strings.HasSuffix(script, "'") {
		t.Fatalf("ExecStopPost %q: want /bin/sh -c '...'", post)
	}
	// systemd unescapes $$ and %% before it runs the command.
	script = strings.NewReplacer("$$", "$", "%%", "%").Replace(strings.TrimSuffix(script, "'"))
	dir := t.TempDir()
	script = strings.ReplaceAll(script, filepath.Dir(html), dir)
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(html)), []byte("<!doctype html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "run-2000-01-01.html")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(old, time.Now().AddDate(0, 0, -20), time.Now().AddDate(0, 0, -20)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("ExecStopPost: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-"+time.Now().UTC().Format("2006-01-02")+".html")); err != nil {
		t.Errorf("no dated copy of the page: %v", err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a page older than two weeks was kept: %v", err)
	}
}

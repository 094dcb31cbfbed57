package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

// TestSecretsNeverShown: a registry password in the containerd files never
// appears in any output: check-mode diffs, apply output, explain (text and
// JSON), or the JSON and Prometheus reports.
func TestSecretsNeverShown(t *testing.T) {
	const secret = "S3cr3t-pw-7d1f"
	// A credential under a key only the user knows is one (--redact).
	const apiKey = "K3y-9a8b7c"
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident", NoContainerd: true})
	auth := "\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"harbor.lab\".auth]\n  username = \"robot\"\n  password = \"" + secret + "\"\n" +
		"[plugins.\"io.containerd.grpc.v1.cri\".registry.headers]\n  X-Api-Key = [\"" + apiKey + "\"]\n"
	for _, n := range l.Nodes {
		p := l.NodePath(n.Name, "/etc/containerd/config.toml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Right after runc's options, so omen's repair diff has it in
		// its context lines.
		s := strings.Replace(string(b), "SystemdCgroup = true\n", "SystemdCgroup = true\n"+auth, 1)
		if s == string(b) {
			t.Fatalf("%s: no anchor for the secret", n.Name)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	pb := shippedPlaybook()
	var outputs []result
	outputs = append(outputs,
		nc(t, append([]string{"explain", "--redact", "X-Api-Key"}, labArgs(l)...)...),
		nc(t, append([]string{"explain", "--json", "--all", "--redact", "X-Api-Key"}, labArgs(l)...)...),
		nc(t, append([]string{"apply", "--redact", "X-Api-Key", "--check", "--diff", "-v", "--report", "json=" + filepath.Join(dir, "c.json"), "--report", "prom=" + filepath.Join(dir, "c.prom")}, labArgs(l, pb)...)...),
		nc(t, append([]string{"apply", "--redact", "X-Api-Key", "--diff", "-v", "--report", "json=" + filepath.Join(dir, "a.json")}, labArgs(l, pb)...)...),
	)
	if !strings.Contains(outputs[2].stdout, "update /etc/containerd/config.toml") || !strings.Contains(outputs[2].stdout, "<redacted>") {
		t.Fatalf("the check-mode diff should show omen's repair with the password redacted:\n%s", outputs[2])
	}
	for i, o := range outputs {
		if strings.Contains(o.stdout+o.stderr, secret) || strings.Contains(o.stdout+o.stderr, apiKey) {
			t.Errorf("output %d shows the password:\n%s", i, o)
		}
	}
	for _, f := range []string{"c.json", "c.prom", "a.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) || strings.Contains(string(b), apiKey) {
			t.Errorf("report %s shows the password", f)
		}
	}
}

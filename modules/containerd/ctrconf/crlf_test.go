package ctrconf

import (
	"slices"
	"testing"
)

// TestScanImportsCRLF: a file with CRLF line endings that does not parse
// (a table pasted twice) still has readable imports; before, the bare '\r'
// that splitting at '\n' leaves made the fragment invalid TOML, Gather saw
// no imports, and staging the repaired candidate failed (issue 10, defect 9).
func TestScanImportsCRLF(t *testing.T) {
	for _, src := range []string{
		"version = 2\r\nimports = [\"/etc/containerd/conf.d/*.toml\"]\r\n[a]\r\n[a]\r\n",
		"version = 2\r\nimports = [\r\n  \"/etc/containerd/conf.d/*.toml\",\r\n]\r\n[a]\r\n[a]\r\n",
	} {
		got, err := scanImports([]byte(src))
		if err != nil || !slices.Equal(got, []string{"/etc/containerd/conf.d/*.toml"}) {
			t.Errorf("scanImports(%q) = %q, %v", src, got, err)
		}
	}
}

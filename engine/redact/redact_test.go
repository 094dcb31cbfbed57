package redact

import (
	"strings"
	"testing"
)

func TestBuiltinAndUserKeys(t *testing.T) {
	in := "password = \"hunter2\"\nclient_secret = \"abc\"\nheaders = { X-Api-Key = \"k-1\" }\nplain = \"keep\"\n"
	out := Text(in)
	if !strings.Contains(out, `password = "<redacted>"`) || !strings.Contains(out, "client_secret") {
		t.Fatalf("built-in keys: %s", out)
	}
	if !strings.Contains(out, `k-1`) {
		t.Fatalf("X-Api-Key is not a built-in name and must survive before it is listed:\n%s", out)
	}
	Add("X-Api-Key", `plugins."io.containerd.grpc.v1.cri".registry.headers`)
	out = Text(in)
	if strings.Contains(out, "k-1") || strings.Contains(out, "hunter2") || !strings.Contains(out, `plain = "keep"`) {
		t.Fatalf("user-listed key not redacted, or too much redacted:\n%s", out)
	}
	if !Key(`plugins."io.containerd.grpc.v1.cri".registry.headers.Foo`, []string{"plugins", "io.containerd.grpc.v1.cri", "registry", "headers", "Foo"}) {
		t.Fatal("a key under a user-listed path must be redacted")
	}
	if Key(`plugins."io.containerd.grpc.v1.cri".registry.config_path`, []string{"plugins", "io.containerd.grpc.v1.cri", "registry", "config_path"}) {
		t.Fatal("config_path is no credential")
	}
}

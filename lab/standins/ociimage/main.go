// Command ociimage writes the lab's sandbox image: an OCI image layout in a
// tar archive, one layer holding one static program at /pause, its config
// running it, and one index entry per name so that `ctr images import`
// registers the image under every name given. The lab has no registry and
// no network (lab/README.md), so this is how each node gets the sandbox
// image its containerd is configured with, and only through an import: no
// pull ever happens.
//
// Usage: ociimage -bin PAUSE -out IMAGE.tar NAME...
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// epoch makes the archive reproducible: the same program gives the same
// digests, so an image already imported is recognised by containerd.
var epoch = time.Unix(0, 0).UTC()

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func main() {
	bin := flag.String("bin", "", "the static program to put at /pause")
	out := flag.String("out", "", "the tar archive to write")
	flag.Parse()
	if *bin == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: ociimage -bin PAUSE -out IMAGE.tar NAME...")
		os.Exit(2)
	}
	if err := write(*bin, *out, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "ociimage: %v\n", err)
		os.Exit(1)
	}
}

func write(bin, out string, names []string) error {
	prog, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read %s: %w", bin, err)
	}
	// The layer: /pause, mode 0755, root-owned.
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(prog)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("layer header: %w", err)
	}
	if _, err := tw.Write(prog); err != nil {
		return fmt.Errorf("layer content: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close layer: %w", err)
	}
	diffID := sha(layerTar.Bytes())
	var layer bytes.Buffer
	gz := gzip.NewWriter(&layer)
	gz.ModTime = epoch
	if _, err := gz.Write(layerTar.Bytes()); err != nil {
		return fmt.Errorf("compress layer: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("compress layer: %w", err)
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": []string{"/pause"}, "WorkingDir": "/"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history":      []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "nodeconverge lab/standins/ociimage: pause stand-in"}},
	})
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: sha(config), Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: sha(layer.Bytes()), Size: int64(layer.Len())}},
	})
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	var manifests []descriptor
	for _, n := range names {
		manifests = append(manifests, descriptor{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: sha(manifest), Size: int64(len(manifest)),
			// ctr images import names the image after this annotation.
			Annotations: map[string]string{"io.containerd.image.name": n, "org.opencontainers.image.ref.name": n},
			Platform:    &platform{Architecture: runtime.GOARCH, OS: "linux"},
		})
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests})
	if err != nil {
		return fmt.Errorf("encode index: %w", err)
	}
	var arch bytes.Buffer
	aw := tar.NewWriter(&arch)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blob(config), config},
		{blob(manifest), manifest},
		{blob(layer.Bytes()), layer.Bytes()},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := aw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
			return fmt.Errorf("archive %s: %w", dir, err)
		}
	}
	for _, f := range files {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("archive %s: %w", f.name, err)
		}
		if _, err := aw.Write(f.data); err != nil {
			return fmt.Errorf("archive %s: %w", f.name, err)
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	tmp := out + ".tmp"
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(out), err)
	}
	if err := os.WriteFile(tmp, arch.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func blob(b []byte) string {
	s := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(s[:])
}

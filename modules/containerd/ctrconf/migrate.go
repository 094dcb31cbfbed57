package ctrconf

import "slices"

// containerd 2.x migrates every file older than version 3 on its own before
// merging it (cmd/containerd/server/config LoadConfigWithPlugins): the CRI
// plugins' ConfigMigration functions move what a version 2 file says under
// io.containerd.grpc.v1.cri into io.containerd.cri.v1.images and
// io.containerd.cri.v1.runtime. The dump then shows the value under the new
// name, and a file that spells it the old way is still the file that decided
// it. migratedKey maps a key as the file spells it to the key the dump shows,
// so attribution credits that file and does not call its value lost. The
// mapping mirrors containerd 2.4's plugins/cri/{images,runtime}/plugin.go;
// it only ever decides who spelled a value the dumps measured, never what is
// effective, so a release that migrates differently makes a value inferred,
// not wrong.

// The CRI plugin ids, named once for every module that reads a dump.
const (
	// CRIPlugin holds the whole CRI configuration in containerd 1.x
	// (config version 2); in 2.x only the CRI server's stream settings.
	CRIPlugin = "io.containerd.grpc.v1.cri"
	// CRIImagesPlugin holds 2.x's image settings (registry, sandbox).
	CRIImagesPlugin = "io.containerd.cri.v1.images"
	// CRIRuntimePlugin holds 2.x's runtimes.
	CRIRuntimePlugin = "io.containerd.cri.v1.runtime"
)

// imageKeys move from the CRI plugin's top level to the images plugin.
var imageKeys = []string{"registry", "image_decryption", "max_concurrent_downloads",
	"image_pull_progress_timeout", "image_pull_with_sync_fs", "stats_collect_period"}

// serverKeys stay in io.containerd.grpc.v1.cri (the CRI server's own config).
var serverKeys = []string{"disable_tcp_service", "stream_server_address", "stream_server_port",
	"stream_idle_timeout", "enable_tls_streaming", "x509_key_pair_streaming"}

// imageContainerdKeys move from the CRI plugin's containerd table to the
// images plugin's top level.
var imageContainerdKeys = []string{"snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers"}

// migratedKey is the key (and value text) containerd 2.x shows for key
// written with value in a file of config version fileVersion; ok is false
// when the daemon keeps the key's name (1.x, a version 3 file, a key outside
// the CRI plugin) or drops the key (enable_cdi, always on in 2.x).
func migratedKey(key, value string, fileVersion, daemonMajor int) (string, string, bool) {
	if daemonMajor < 2 || fileVersion >= 3 {
		return "", "", false
	}
	segs := splitKey(key)
	if len(segs) < 3 || segs[0] != "plugins" || segs[1] != CRIPlugin {
		return "", "", false
	}
	rest := segs[2:]
	join := func(plugin string, tail ...string) string {
		return JoinKey(append([]string{"plugins", plugin}, tail...)...)
	}
	switch {
	case rest[0] == "sandbox_image" && len(rest) == 1:
		return join(CRIImagesPlugin, "pinned_images", "sandbox"), value, true
	case slices.Contains(imageKeys, rest[0]):
		return join(CRIImagesPlugin, rest...), value, true
	case slices.Contains(serverKeys, rest[0]), rest[0] == "enable_cdi":
		return "", "", false
	case rest[0] == "containerd" && len(rest) >= 2 && slices.Contains(imageContainerdKeys, rest[1]):
		return join(CRIImagesPlugin, rest[1:]...), value, true
	case rest[0] == "cni" && len(rest) == 2 && rest[1] == "bin_dir":
		return join(CRIRuntimePlugin, "cni", "bin_dirs"), "[" + value + "]", true
	case rest[0] == "containerd" && len(rest) == 5 && rest[1] == "runtimes" && rest[3] == "sandbox_mode":
		return join(CRIRuntimePlugin, "containerd", "runtimes", rest[2], "sandboxer"), value, true
	}
	return join(CRIRuntimePlugin, rest...), value, true
}

// effectiveKeys is what f writes, named as the daemon of major version
// daemonMajor shows it in its dump: the file's own keys plus, where 2.x
// migrates them, their new names (the old names stay; a dump never shows
// them, so they match nothing).
func (f *File) effectiveKeys(daemonMajor int) map[string]string {
	if daemonMajor < 2 || f.Version >= 3 {
		return f.keys
	}
	out := make(map[string]string, len(f.keys))
	for k, v := range f.keys {
		out[k] = v
	}
	for k, v := range f.keys {
		if nk, nv, ok := migratedKey(k, v, f.Version, daemonMajor); ok {
			if _, both := f.keys[nk]; !both {
				// A file that spells both keeps the new one, as
				// containerd's migration does.
				out[nk] = nv
			}
		}
	}
	return out
}

// EffectiveKeys is what f writes, each key as the dump of a containerd of
// major version daemonMajor names it (a version 2 file's CRI keys under 2.x
// also appear under their migrated names), with canonical values. The map
// must not be changed; it is nil for a file that does not parse.
func (f *File) EffectiveKeys(daemonMajor int) map[string]string {
	return f.effectiveKeys(daemonMajor)
}

// MigratedKey is migratedKey for modules that convert a file's layout:
// the key (and value text) containerd 2.x shows for key written with
// value in a file of config version fileVersion; ok is false when the
// daemon keeps the name or drops the key.
func MigratedKey(key, value string, fileVersion, daemonMajor int) (string, string, bool) {
	return migratedKey(key, value, fileVersion, daemonMajor)
}

// CRIServerKey reports whether a top-level key of a version 2 file's CRI
// table stays in io.containerd.grpc.v1.cri on 2.x (the CRI server's own
// settings) rather than moving to the images or runtime plugin.
func CRIServerKey(name string) bool { return slices.Contains(serverKeys, name) }

// Package all registers every module that ships with nodeconverge. Adding a
// module is one new folder under modules/ and one blank import here.
package all

import (
	// Each import registers one module in its init.
	_ "nodeconverge/modules/assert"
	_ "nodeconverge/modules/blockinfile"
	_ "nodeconverge/modules/command"
	_ "nodeconverge/modules/containerd_dropins"
	_ "nodeconverge/modules/containerd_hosts"
	_ "nodeconverge/modules/containerd_nvidia"
	_ "nodeconverge/modules/containerd_restart"
	_ "nodeconverge/modules/containerd_settings"
	_ "nodeconverge/modules/copy"
	_ "nodeconverge/modules/debug"
	_ "nodeconverge/modules/fail"
	_ "nodeconverge/modules/file"
	_ "nodeconverge/modules/find"
	_ "nodeconverge/modules/lineinfile"
	_ "nodeconverge/modules/modprobe"
	_ "nodeconverge/modules/replace"
	_ "nodeconverge/modules/service"
	_ "nodeconverge/modules/set_fact"
	_ "nodeconverge/modules/shell"
	_ "nodeconverge/modules/stat"
	_ "nodeconverge/modules/sysctl"
	_ "nodeconverge/modules/template"
)

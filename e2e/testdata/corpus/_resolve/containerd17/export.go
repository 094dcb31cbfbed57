// This file is compiled into containerd 1.7's pkg/cri/server package by the
// e2e test's `go build -overlay` (e2e/corpus_resolve_test.go): it adds
// nothing but an exported door to the CRI service's own registryHosts, so
// the test asks containerd's code, not a copy of it, where a pull of a
// registry goes.

package server

import (
	"context"

	criconfig "github.com/containerd/containerd/pkg/cri/config"
	"github.com/containerd/containerd/remotes/docker"
)

// NodeconvergeRegistryHosts is (*criService).registryHosts for a CRI
// service with configuration cfg and no pull credentials: with
// cfg.Registry.ConfigPath set it reads the hosts.toml tree there
// (config.ConfigureHosts), without it the legacy registry.mirrors and
// registry.configs.
func NodeconvergeRegistryHosts(ctx context.Context, cfg criconfig.Config) docker.RegistryHosts {
	c := &criService{config: cfg}
	return c.registryHosts(ctx, nil, nil)
}

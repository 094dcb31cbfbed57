// This file is compiled into containerd 2.x's internal/cri/server/images
// package by the e2e test's `go build -overlay` (e2e/corpus_resolve_test.go):
// it adds nothing but an exported door to the CRI image service's own
// registryHosts, so the test asks containerd's code, not a copy of it, where
// a pull of a registry goes.

package images

import (
	"context"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	criconfig "github.com/containerd/containerd/v2/internal/cri/config"
)

// NodeconvergeRegistryHosts is (*CRIImageService).registryHosts for an
// image service with configuration cfg and no pull credentials: with
// cfg.Registry.ConfigPath set it reads the hosts.toml tree there
// (config.ConfigureHosts), without it the legacy registry.mirrors and
// registry.configs.
func NodeconvergeRegistryHosts(ctx context.Context, cfg criconfig.ImageConfig) docker.RegistryHosts {
	c := &CRIImageService{config: cfg}
	return c.registryHosts(ctx, nil, nil)
}

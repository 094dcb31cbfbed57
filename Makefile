# nodeconverge — build, test, lab and demo.
# `make demo` and `make test` are the README's quick start; both must work on
# a fresh machine (as root: the lab uses mount namespaces and apt).

GO      ?= go
BIN     := bin/nodeconverge
LAB_DIR ?= /tmp/nclab
N       ?= 4
SCENARIO ?= incident
CONTAINERD2 := bin/containerd2
CONTAINERD17 := bin/containerd17
NVIDIA_CTK := bin/nvidia-ctk
CRICTL := bin/crictl

.PHONY: fuzz deps build test vet fmt-check shellcheck lab-up lab-down demo containerd2 containerd17 nvidia-ctk crictl corpus faults bench clean

# Installs (apt) what the demo, the tests and the bench need; does nothing when
# all of it is present. Every entry point below calls it first.
deps:
	lab/deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/nodeconverge

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './lab/containerd2/*' -not -path './lab/containerd17/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Every shell script in the repository, the node-side scripts the engine
# embeds (engine/node/sh) among them. Their shellcheck directives say why
# each warning left is intended.
shellcheck:
	shellcheck $$(git ls-files '*.sh' 2>/dev/null || find . -name '*.sh' -not -path './lab/containerd2/*' -not -path './lab/containerd17/*')

# The end-to-end tests start real sshd and containerd lab nodes; they need root.
test: deps fmt-check vet shellcheck containerd2 containerd17 nvidia-ctk crictl
	NODECONVERGE_CONTAINERD2="$(CURDIR)/$(CONTAINERD2)" NODECONVERGE_CONTAINERD17="$(CURDIR)/$(CONTAINERD17)" \
	NODECONVERGE_NVIDIA_CTK="$(CURDIR)/$(NVIDIA_CTK)" NODECONVERGE_CRICTL="$(CURDIR)/$(CRICTL)" \
		$(GO) test -race -count=1 -timeout 60m -skip '^TestCorpusMatrix$$' ./...
	$(MAKE) --no-print-directory fuzz

# Go's native fuzzing, for a bounded time each (issue 29): arbitrary bytes in host names, values,
# node file contents and command output through the human output and the JSON report (no raw
# control byte on the terminal stream, no line that reads as another host's status or recap line,
# the JSON valid and exact), and safetext itself. `go test` above runs their seed corpora; a
# failure found here is written under the package's testdata/fuzz and fails every later run.
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzHumanAndReports$$' -fuzztime $(FUZZTIME) ./engine/report/
	$(GO) test -run '^$$' -fuzz '^FuzzLine$$' -fuzztime $(FUZZTIME) ./engine/safetext/

containerd2:
	lab/containerd2/build.sh $(CONTAINERD2)

# containerd 1.7 (Ubuntu 24.04's line), built from its Go module like 2.x.
containerd17:
	lab/containerd17/build.sh $(CONTAINERD17)

# NVIDIA's nvidia-ctk, built from the toolkit's Go module (lab/nvidia-ctk pins the version): the e2e
# tests run its `runtime configure` on lab nodes to check that nodeconverge catches what it undoes.
# Phony like containerd2: build.sh keeps the binary while it is newer than its go.mod.
nvidia-ctk:
	lab/nvidia-ctk/build.sh $(NVIDIA_CTK)

# crictl from sigs.k8s.io/cri-tools (lab/crictl pins the version): the health gate's fallback when a
# node's sshd does not forward the containerd socket; the e2e tests put it on lab nodes.
crictl:
	lab/crictl/build.sh $(CRICTL)

# The corpus matrix (kept out of `make test`: about 15-20 min per containerd generation on a loaded
# 2-core machine, 57 min for all three): every public config in e2e/testdata/corpus x {alone, the incident's drop-ins,
# the GPU Operator's drop-in} x {containerd 1.6, 1.7, 2.x}, with the shipped playbook; writes the
# table to e2e/testdata/corpus/MATRIX.md.
corpus: deps containerd2 containerd17
	NODECONVERGE_CONTAINERD2="$(CURDIR)/$(CONTAINERD2)" NODECONVERGE_CONTAINERD17="$(CURDIR)/$(CONTAINERD17)" \
	NODECONVERGE_CORPUS_TABLE="$(CURDIR)/e2e/testdata/corpus/MATRIX.md" \
		$(GO) test -count=1 -timeout 150m -v -run 'TestCorpusMatrix' ./e2e/

# The fault-injection suite (issue 11): every e2e TestFault* case (hung sessions, lost and
# unreachable hosts, kills mid-run, broken CRI after a restart, SIGTERM mid-restart, injection and
# secret probes) on lab nodes, containerd 1.6 and 2.x. `make test` runs these too (they are e2e
# tests); this target runs only them, for working on one fault class.
faults: deps containerd2 crictl
	NODECONVERGE_CONTAINERD2="$(CURDIR)/$(CONTAINERD2)" NODECONVERGE_CRICTL="$(CURDIR)/$(CRICTL)" \
		$(GO) test -race -count=1 -timeout 20m -v -run '^TestFault' ./e2e/

lab-up: deps build
	lab/lab.sh up --dir $(LAB_DIR) --nodes $(N) --scenario $(SCENARIO)

lab-down:
	lab/lab.sh down --dir $(LAB_DIR)

demo: deps build
	lab/demo.sh $(LAB_DIR)

bench: deps build
	bench/run.sh

clean:
	rm -rf bin

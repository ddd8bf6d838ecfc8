// Module images builds container images for the local node without a
// registry or a container engine (see docs/local-control-plane.md). It is
// separate from the project's go.mod so that the project does not depend on
// go-containerregistry.
module github.com/captf/captf/hack/tools/images

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)

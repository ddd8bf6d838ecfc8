// Command images builds the local node's container images from static Go
// binaries and files, without a registry or a container engine, and
// imports them into containerd (see docs/local-control-plane.md, "Images").
//
//	go run ./hack/tools/images pause   -address SOCK
//	go run ./hack/tools/images captf   -address SOCK -repo ROOT
//	go run ./hack/tools/images go      -address SOCK -repo ROOT -pkg ./path/to/cmd -name captf.local/x:dev
//	go run ./hack/tools/images build   -name captf.local/x:dev -entrypoint /x -file bin/x=/x [-file SRC=DST[:MODE]]... (-address SOCK | -out ARCHIVE)
//
// (run from hack/tools/images, or build it once). Every command prints
// "NAME DIGEST imported|cached"; an image containerd already has at the same
// digest is not imported again. Binaries are built with CGO_ENABLED=0.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/captf/captf/hack/tools/images/image"
)

// The names pods and containerd's sandbox_image use.
const (
	PauseImage = "captf.local/pause:dev"
	CaptfImage = "captf.local/captf:dev"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: images pause|captf|go|build [flags] (see the package comment)")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(command string, args []string) error {
	fs := flag.NewFlagSet(command, flag.ExitOnError)
	address := fs.String("address", "", "containerd socket to import into")
	out := fs.String("out", "", "write an OCI archive here instead of (or as well as) importing")
	repo := fs.String("repo", "../../..", "the captf repository root")
	name := fs.String("name", "", "image name, e.g. captf.local/x:dev")
	pkg := fs.String("pkg", "", "go: the package to build, relative to -repo")
	entrypoint := fs.String("entrypoint", "", "build: the entrypoint, comma-separated (go: defaults to /<binary>)")
	cmd := fs.String("cmd", "", "build: the default arguments, comma-separated")
	user := fs.String("user", "", "uid:gid (default 65532:65532)")
	workdir := fs.String("workdir", "", "working directory (default /)")
	var files, env multi
	fs.Var(&files, "file", "build, go: SRC=DST[:MODE] (octal MODE), repeatable")
	fs.Var(&env, "env", "K=V, repeatable")
	_ = fs.Parse(args)

	tmp, err := os.MkdirTemp("", "captf-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}

	spec := image.Spec{Name: *name, User: *user, Env: env, WorkingDir: *workdir}
	switch command {
	case "pause":
		bin := filepath.Join(tmp, "pause")
		if err := goBuild(filepath.Join(root, "hack", "tools", "images"), "./pause", bin, ""); err != nil {
			return err
		}
		spec = image.Spec{Name: PauseImage, User: "65535:65535", Entrypoint: []string{"/pause"},
			Files: []image.File{{Source: bin, Path: "/pause"}}}
	case "captf":
		// What the Dockerfile builds: one static binary, /captf, run as
		// 65532:65532 (distroless/static:nonroot).
		bin := filepath.Join(tmp, "captf")
		if err := goBuild(root, "./cmd/captf", bin, "-X github.com/captf/captf/pkg/version.Version=dev"); err != nil {
			return err
		}
		spec = image.Spec{Name: CaptfImage, User: "65532:65532", Entrypoint: []string{"/captf"},
			Files: []image.File{{Source: bin, Path: "/captf"}}}
	case "go":
		if *pkg == "" || *name == "" {
			return fmt.Errorf("go: -pkg and -name are required")
		}
		base := filepath.Base(*pkg)
		bin := filepath.Join(tmp, base)
		if err := goBuild(root, *pkg, bin, ""); err != nil {
			return err
		}
		spec.Files = append(spec.Files, image.File{Source: bin, Path: "/" + base})
		spec.Entrypoint = []string{"/" + base}
		if *entrypoint != "" {
			spec.Entrypoint = strings.Split(*entrypoint, ",")
		}
	case "build":
		if *entrypoint == "" {
			return fmt.Errorf("build: -entrypoint is required")
		}
		spec.Entrypoint = strings.Split(*entrypoint, ",")
	default:
		return fmt.Errorf("unknown command %q", command)
	}
	if *cmd != "" {
		spec.Cmd = strings.Split(*cmd, ",")
	}
	for _, f := range files {
		file, err := parseFile(f)
		if err != nil {
			return err
		}
		spec.Files = append(spec.Files, file)
	}
	if *address == "" && *out == "" {
		return fmt.Errorf("-address or -out is required")
	}

	img, err := image.Build(spec)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if *out != "" {
		if err := image.WriteArchive(img, spec.Name, *out); err != nil {
			return err
		}
	}
	if *address != "" {
		return importAndReport(*address, spec.Name, img, digest)
	}
	fmt.Printf("%s %s written to %s\n", spec.Name, digest, *out)
	return nil
}

func importAndReport(address, name string, img v1.Image, digest v1.Hash) error {
	imported, err := image.Import(address, name, img)
	if err != nil {
		return err
	}
	what := "cached"
	if imported {
		what = "imported"
	}
	fmt.Printf("%s %s %s\n", name, digest, what)
	return nil
}

// parseFile parses SRC=DST[:MODE].
func parseFile(s string) (image.File, error) {
	src, dst, ok := strings.Cut(s, "=")
	if !ok || src == "" || dst == "" {
		return image.File{}, fmt.Errorf("-file %q: want SRC=DST[:MODE]", s)
	}
	f := image.File{Source: src, Path: dst}
	if p, m, ok := strings.Cut(dst, ":"); ok {
		mode, err := strconv.ParseUint(m, 8, 32)
		if err != nil {
			return image.File{}, fmt.Errorf("-file %q: mode: %w", s, err)
		}
		f.Path, f.Mode = p, os.FileMode(mode)
	}
	return f, nil
}

// goBuild builds a static binary of pkg (relative to dir) into out.
func goBuild(dir, pkg, out, ldflags string) error {
	args := []string{"build", "-trimpath", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

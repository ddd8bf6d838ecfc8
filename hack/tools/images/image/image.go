// Package image builds container images from local files (static binaries,
// configuration) without a registry or a container engine, and imports them
// into containerd. See docs/local-control-plane.md, "Images".
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user distroless/static:nonroot runs as, and the user every
// image built here defaults to.
const NonRoot = 65532

// File is one file in an image.
type File struct {
	// Source is a path on this machine; Data is used when Source is empty.
	Source string
	Data   []byte
	// Path is the absolute path in the image.
	Path string
	// Mode is the file mode; 0 means 0755 for Source (binaries) and 0644
	// for Data.
	Mode fs.FileMode
}

// Spec describes an image: files on top of a minimal base (an /etc/passwd
// and /etc/group naming root and nonroot, /tmp, /home/nonroot), the
// entrypoint, user, environment and working directory.
type Spec struct {
	// Name is the image reference containerd stores it under, for example
	// captf.local/captf:dev.
	Name       string
	Files      []File
	Entrypoint []string
	Cmd        []string
	// User is "uid:gid"; empty means 65532:65532.
	User       string
	Env        []string
	WorkingDir string
}

// epoch is every file's and the image's time, so that the same inputs give
// the same digest (the import skips an image containerd already has).
var epoch = time.Unix(0, 0).UTC()

// Build returns the image Spec describes.
func Build(s Spec) (v1.Image, error) {
	if s.Name == "" || len(s.Entrypoint) == 0 {
		return nil, fmt.Errorf("image: Name and Entrypoint are required")
	}
	base, err := tarLayer(baseFiles())
	if err != nil {
		return nil, err
	}
	files, err := tarLayer(s.Files)
	if err != nil {
		return nil, err
	}
	user := s.User
	if user == "" {
		user = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	}
	env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, s.Env...)
	wd := s.WorkingDir
	if wd == "" {
		wd = "/"
	}
	cfg := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: s.Entrypoint,
			Cmd:        s.Cmd,
			User:       user,
			Env:        env,
			WorkingDir: wd,
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var adds []mutate.Addendum
	for _, l := range []*bytes.Buffer{base, files} {
		b := l.Bytes()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "captf hack/tools/images"}})
	}
	return mutate.Append(img, adds...)
}

// WriteArchive writes img as an OCI image layout in a tar file that
// `ctr images import` reads, naming it name.
func WriteArchive(img v1.Image, name, archive string) error {
	dir, err := os.MkdirTemp("", "captf-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tag := name
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return err
	}
	return tarDir(dir, archive)
}

// baseFiles is what distroless/static:nonroot offers a static binary.
func baseFiles() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/tmp/", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "/home/nonroot/", Mode: fs.ModeDir | 0o700},
	}
}

// tarLayer writes files, and the directories above them, into a tar.
func tarLayer(files []File) (*bytes.Buffer, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	buf := &bytes.Buffer{}
	tw := tar.NewWriter(buf)
	dirs := map[string]bool{}
	addDir := func(dir string, mode fs.FileMode, uid int) error {
		if dir == "/" || dir == "." || dirs[dir] {
			return nil
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/",
			Mode: int64(mode.Perm()) | modeBits(mode), ModTime: epoch, Uid: uid, Gid: uid, Format: tar.FormatPAX,
		})
	}
	var parents func(p string) error
	parents = func(p string) error {
		d := path.Dir(p)
		if d == "/" || dirs[d] {
			return nil
		}
		if err := parents(d); err != nil {
			return err
		}
		return addDir(d, 0o755, 0)
	}
	for _, f := range sorted {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("image: %q is not an absolute path", f.Path)
		}
		clean := path.Clean(f.Path)
		if err := parents(clean); err != nil {
			return nil, err
		}
		if f.Mode.IsDir() {
			uid := 0
			if strings.HasPrefix(clean, "/home/nonroot") {
				uid = NonRoot
			}
			if err := addDir(clean, f.Mode, uid); err != nil {
				return nil, err
			}
			continue
		}
		data, mode := f.Data, f.Mode
		if f.Source != "" {
			b, err := os.ReadFile(f.Source)
			if err != nil {
				return nil, err
			}
			data = b
			if mode == 0 {
				mode = 0o755
			}
		} else if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: strings.TrimPrefix(clean, "/"),
			Mode: int64(mode.Perm()), Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	return buf, tw.Close()
}

func modeBits(m fs.FileMode) int64 {
	var b int64
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// tarDir writes the files under dir into the tar file out.
func tarDir(dir, out string) error {
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(out + ".tmp")
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime = epoch
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			defer src.Close()
			if _, err := io.Copy(tw, src); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}

package image

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Namespace is the containerd namespace the kubelet's CRI uses.
const Namespace = "k8s.io"

// Imported reports the digest containerd at address stores name under, or
// "" when it has no such image.
func Imported(address, name string) (string, error) {
	out, err := ctr(address, "images", "ls", "name=="+name)
	if err != nil {
		return "", err
	}
	// REF TYPE DIGEST SIZE PLATFORMS LABELS
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 3 && fields[0] == name {
			return fields[2], nil
		}
	}
	return "", nil
}

// Import imports img as name into containerd at address, unless containerd
// already has name at img's digest. It reports whether it imported.
func Import(address, name string, img v1.Image) (bool, error) {
	digest, err := img.Digest()
	if err != nil {
		return false, err
	}
	have, err := Imported(address, name)
	if err != nil {
		return false, err
	}
	if have == digest.String() {
		return false, tagDigest(address, name, digest.String())
	}
	dir, err := os.MkdirTemp("", "captf-import-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "image.tar")
	if err := WriteArchive(img, name, archive); err != nil {
		return false, err
	}
	if _, err := ctr(address, "images", "import", archive); err != nil {
		return false, err
	}
	if have, err = Imported(address, name); err != nil {
		return false, err
	}
	if have != digest.String() {
		return false, fmt.Errorf("import of %s: containerd has digest %q, want %s", name, have, digest)
	}
	return true, tagDigest(address, name, digest.String())
}

// tagDigest gives the image name also its digest reference,
// <repository>@<digest>, as a pull does: the CRI then reports it among the
// image's repo digests, the kubelet puts it in a pod's imageID, and the
// manager can pin the image a Job ran (SPEC O6). Without it an imported
// image has only its configuration ID, and every apply reports
// DigestUnknown.
func tagDigest(address, name, digest string) error {
	ref := Repository(name) + "@" + digest
	if have, err := Imported(address, ref); err != nil || have == digest {
		return err
	}
	_, err := ctr(address, "images", "tag", "--force", name, ref)
	return err
}

// Repository is name without its tag or digest.
func Repository(name string) string {
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name
}

func ctr(address string, args ...string) (string, error) {
	cmd := exec.Command("ctr", append([]string{"--namespace", Namespace, "--address", address}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

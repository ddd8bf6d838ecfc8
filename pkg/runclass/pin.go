package runclass

import (
	"regexp"
	"strings"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// SPEC O6: digest pinning (upstream A3-70..A3-72). Pure decisions; the
// workload controller records status.source and builds Jobs from them.

// repoDigest is a pullable digest in a pod's imageID: the kubelet reports
// "repository@sha256:<hex>" (containerd, CRI-O) or, from dockershim's
// days, "docker-pullable://repository@sha256:<hex>". A bare "sha256:<hex>"
// is the local image's configuration ID (an image loaded on the node, not
// pulled): not a reference anyone can run, so never pinned.
var repoDigest = regexp.MustCompile(`@(sha256:[a-f0-9]{64})$`)

// DigestOf returns the pullable digest ("sha256:<64 hex>") of a pod's
// imageID, "" when it has none.
func DigestOf(imageID string) string {
	if len(imageID) > maxImage+80 {
		return ""
	}
	m := repoDigest.FindStringSubmatch(imageID)
	if m == nil {
		return ""
	}
	return m[1]
}

// PinnedRef is image run by digest: its repository (without a tag or a
// digest) followed by "@" and digest.
func PinnedRef(image, digest string) string {
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@" + digest
}

// RunImage is the image a Job of an object of kind runs, whose
// spec.source.image is image and whose status.source is src: a machine
// pinned for that image runs it by digest (its later runs: a destroy, a
// re-apply; O6); anything else runs image as the spec names it (clusters
// and pools follow their spec and re-pin on each apply).
func RunImage(kind, image string, src *v1alpha1.SourceStatus) string {
	if kind != v1alpha1.KindTerraformMachine || src == nil || src.Image != image || src.ImageDigest == "" || image == "" {
		return image
	}
	return PinnedRef(image, src.ImageDigest)
}

// Repin returns status.source after a successful apply of an object of
// kind that ran image (the Job's module image) with digest (DigestOf its
// pod's imageID), and whether it changed: a machine pins once per image
// (its first successful apply of it); a cluster or pool re-pins on each.
// Without a digest, or for an image the Job ran by digest already,
// nothing changes.
func Repin(kind string, src *v1alpha1.SourceStatus, image, digest string) (*v1alpha1.SourceStatus, bool) {
	if digest == "" || image == "" || len(image) > maxImage || strings.Contains(image, "@") {
		return src, false
	}
	if src != nil && src.Image == image && (kind == v1alpha1.KindTerraformMachine || src.ImageDigest == digest) {
		return src, false
	}
	return &v1alpha1.SourceStatus{Image: image, ImageDigest: digest}, true
}

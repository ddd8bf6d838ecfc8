package jobs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// SPEC O5: a restore Job records the serial it pushes, runs `captf runner
// restore --restore-chunks`, and mounts the backup's Secrets, part i as
// the file i, read-only and none optional; no other Job has the volume or
// the flag.
func TestBuildO5RestoreJob(t *testing.T) {
	p := params(v1alpha1.JobActionRestore)
	p.Restore = &Restore{Serial: 7, Secrets: []string{"captf-state-backup-web-cluster-7", "captf-state-backup-web-cluster-7-part-1"}}
	j := Build(p)
	require.Equal(t, "7", j.Annotations[v1alpha1.AnnotationJobRestoreSerial])
	serial, ok := RestoreSerialOf(j)
	require.True(t, ok)
	require.Equal(t, int64(7), serial)
	require.Equal(t, v1alpha1.JobActionRestore, ActionOf(j))
	pod := j.Spec.Template.Spec
	cmd := strings.Join(pod.Containers[0].Command, " ")
	require.Contains(t, cmd, " runner restore ")
	require.Contains(t, cmd, "--restore-chunks="+RestoreDir)
	var found bool
	for _, v := range pod.Volumes {
		if v.Name != RestoreVolumeName {
			continue
		}
		found = true
		require.Len(t, v.Projected.Sources, 2)
		for i, src := range v.Projected.Sources {
			require.Equal(t, p.Restore.Secrets[i], src.Secret.Name)
			require.Nil(t, src.Secret.Optional)
			require.Equal(t, "tfstate", src.Secret.Items[0].Key)
			require.Equal(t, []string{"0", "1"}[i], src.Secret.Items[0].Path)
		}
	}
	require.True(t, found, "the restore volume")
	var mounted bool
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == RestoreVolumeName {
			mounted = m.ReadOnly && m.MountPath == RestoreDir
		}
	}
	require.True(t, mounted, "mounted read-only at %s", RestoreDir)

	apply := Build(params(v1alpha1.JobActionApply))
	require.NotContains(t, strings.Join(apply.Spec.Template.Spec.Containers[0].Command, " "), "--restore-chunks")
	for _, v := range apply.Spec.Template.Spec.Volumes {
		require.NotEqual(t, RestoreVolumeName, v.Name)
	}
	_, ok = RestoreSerialOf(apply)
	require.False(t, ok)
}

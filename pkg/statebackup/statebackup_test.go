package statebackup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNames(t *testing.T) {
	require.Equal(t, "captf-state-backup-web-cluster-7", Name("web-cluster", 7))
	require.Equal(t, "captf-state-backup-web-cluster-7", PartName("web-cluster", 7, 0))
	require.Equal(t, "captf-state-backup-web-cluster-7-part-2", PartName("web-cluster", 7, 2))
	// The longest suffix (63) and serial still make a valid Secret name.
	long := "a23456789012345678901234567890123456789012345678901-0123456789-machine"[:63]
	require.Empty(t, validation.IsDNS1123Subdomain(PartName(long, 1<<62, 15)))
	require.True(t, Selector("x-cluster").Matches(labels.Set(Labels("x-cluster", 3, 1))))
	require.False(t, Selector("x-cluster").Matches(labels.Set(Labels("y-cluster", 3, 1))))
}

func TestParse(t *testing.T) {
	const sfx = "web-cluster"
	for _, tc := range []struct {
		name   string
		secret string
		labels map[string]string
		serial int64
		part   int
		ok     bool
	}{
		{"first part", "captf-state-backup-web-cluster-7", Labels(sfx, 7, 0), 7, 0, true},
		{"later part", "captf-state-backup-web-cluster-7-part-3", Labels(sfx, 7, 3), 7, 3, true},
		{"name of another serial", "captf-state-backup-web-cluster-8", Labels(sfx, 7, 0), 0, 0, false},
		{"name of another part", "captf-state-backup-web-cluster-7-part-2", Labels(sfx, 7, 3), 0, 0, false},
		{"labels of another suffix", "captf-state-backup-web-cluster-7", Labels("db-cluster", 7, 0), 0, 0, false},
		{"a tenant's Secret with the labels", "my-secret", Labels(sfx, 7, 0), 0, 0, false},
		{"no backup label", "captf-state-backup-web-cluster-7", map[string]string{LabelSuffix: sfx, LabelSerial: "7", LabelPart: "0"}, 0, 0, false},
		{"serial not canonical", "captf-state-backup-web-cluster-07", map[string]string{LabelBackup: "true", LabelSuffix: sfx, LabelSerial: "07", LabelPart: "0"}, 0, 0, false},
		{"negative serial", "captf-state-backup-web-cluster--1", map[string]string{LabelBackup: "true", LabelSuffix: sfx, LabelSerial: "-1", LabelPart: "0"}, 0, 0, false},
		{"part not a number", "captf-state-backup-web-cluster-7-part-x", map[string]string{LabelBackup: "true", LabelSuffix: sfx, LabelSerial: "7", LabelPart: "x"}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serial, part, ok := Parse(sfx, tc.secret, tc.labels)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.serial, serial)
			require.Equal(t, tc.part, part)
		})
	}
}

func TestGroupAndRetain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	secrets := []Secret{
		{Name: "b-3-part-1", Serial: 3, Part: 1, Created: at(2)},
		{Name: "b-1", Serial: 1, Part: 0, Created: at(0)},
		{Name: "b-3", Serial: 3, Part: 0, Created: at(3)},
		{Name: "b-10", Serial: 10, Part: 0, Created: at(9)},
		{Name: "b-2", Serial: 2, Part: 0, Created: at(1)},
	}
	groups := Group(secrets)
	require.Equal(t, []Backup{
		{Serial: 10, Secrets: []string{"b-10"}, Created: at(9)},
		{Serial: 3, Secrets: []string{"b-3", "b-3-part-1"}, Created: at(3)},
		{Serial: 2, Secrets: []string{"b-2"}, Created: at(1)},
		{Serial: 1, Secrets: []string{"b-1"}, Created: at(0)},
	}, groups)
	require.Equal(t, "b-3", groups[1].Name())

	for _, tc := range []struct {
		keep           int
		kept, prunedTo []int64
	}{
		{keep: 5, kept: []int64{10, 3, 2, 1}},
		{keep: 4, kept: []int64{10, 3, 2, 1}},
		{keep: 2, kept: []int64{10, 3}, prunedTo: []int64{2, 1}},
		{keep: 1, kept: []int64{10}, prunedTo: []int64{3, 2, 1}},
		{keep: 0, prunedTo: []int64{10, 3, 2, 1}},
		{keep: -1, prunedTo: []int64{10, 3, 2, 1}},
	} {
		kept, pruned := Retain(groups, tc.keep)
		require.Equal(t, tc.kept, serials(kept), "keep %d", tc.keep)
		require.Equal(t, tc.prunedTo, serials(pruned), "keep %d", tc.keep)
	}
	kept, pruned := Retain(nil, 5)
	require.Empty(t, kept)
	require.Empty(t, pruned)
}

func TestGroupWithoutFirstPart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := Group([]Secret{{Name: "b-4-part-2", Serial: 4, Part: 2, Created: t0.Add(time.Minute)}, {Name: "b-4-part-1", Serial: 4, Part: 1, Created: t0}})
	require.Equal(t, []Backup{{Serial: 4, Secrets: []string{"b-4-part-1", "b-4-part-2"}, Created: t0}}, g)
}

func serials(bs []Backup) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.Serial)
	}
	return out
}

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name         string
		keep         int
		serial, last int64
		ok, due      bool
	}{
		{"first backup", 5, 1, 0, false, true},
		{"new serial", 5, 8, 7, true, true},
		{"same serial: steady", 5, 7, 7, true, false},
		{"lower serial after a push", 5, 4, 7, true, true},
		{"backups off", 0, 8, 7, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.due, Due(tc.keep, tc.serial, tc.last, tc.ok))
		})
	}
}

// TestBytesO5: status.stateBackups[].bytes (upstream A1-88) is the sum of
// the parts' recorded sizes, unknown when any part's size is missing or
// malformed (a backup written before sizes were recorded).
func TestBytesO5(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want int64
	}{
		{"recorded", map[string]string{AnnotationBytes: "1234"}, 1234},
		{"zero", map[string]string{AnnotationBytes: "0"}, 0},
		{"missing", nil, BytesUnknown},
		{"negative", map[string]string{AnnotationBytes: "-3"}, BytesUnknown},
		{"not canonical", map[string]string{AnnotationBytes: "012"}, BytesUnknown},
		{"not a number", map[string]string{AnnotationBytes: "1k"}, BytesUnknown},
		{"a Secret's most", map[string]string{AnnotationBytes: "1048576"}, 1 << 20},
		{"more than a Secret holds (a tenant's edit)", map[string]string{AnnotationBytes: "9223372036854775807"}, BytesUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, BytesOf(tc.ann))
		})
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := Group([]Secret{
		{Name: "b-5-part-1", Serial: 5, Part: 1, Created: t0, Bytes: 100},
		{Name: "b-5", Serial: 5, Part: 0, Created: t0, Bytes: 1 << 20},
		{Name: "b-4", Serial: 4, Part: 0, Created: t0, Bytes: BytesUnknown},
		{Name: "b-3-part-1", Serial: 3, Part: 1, Created: t0, Bytes: 7},
		{Name: "b-3", Serial: 3, Part: 0, Created: t0, Bytes: BytesUnknown},
	})
	require.Equal(t, []int64{1<<20 + 100, BytesUnknown, BytesUnknown}, []int64{g[0].Bytes, g[1].Bytes, g[2].Bytes})
}

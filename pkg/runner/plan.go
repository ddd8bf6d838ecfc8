package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"slices"
	"sort"

	"github.com/captf/captf/pkg/runresult"
)

// SPEC O8 (upstream A3-55, A3-63): `captf runner plan` saves a plan
// (`plan -out`) and reads it back with `show -json`; the result document
// carries its counts, the first resources with their action, and its
// fingerprint. `captf runner apply --expect-plan=<fingerprint>` plans the
// same way, compares, and applies exactly that saved plan file when the
// fingerprint is the approved one; otherwise it applies nothing and ends
// with the kind plan-changed. show's output holds the planned values: it
// is read into memory, hashed and dropped, never logged.

const (
	// PlanFile is the saved plan, in the working copy.
	PlanFile = "captf.tfplan"
	// maxShowBytes bounds show -json's output the runner reads.
	maxShowBytes = 64 << 20
	// HashPrefix marks the fingerprint's form: SHA-256 of the planned
	// changes as planHash lays them out, unkeyed (upstream's keyed p2: form
	// with a per-object plan key, A3-66, is not built; docs/design.md).
	HashPrefix = "sha256:"
)

// showJSON is the part of `show -json`'s plan representation the runner
// reads (format_version 1.x, Terraform and OpenTofu alike).
type showJSON struct {
	ResourceChanges []struct {
		Address         string `json:"address"`
		PreviousAddress string `json:"previous_address"`
		Change          struct {
			Actions        []string        `json:"actions"`
			After          json.RawMessage `json:"after"`
			AfterUnknown   json.RawMessage `json:"after_unknown"`
			AfterSensitive json.RawMessage `json:"after_sensitive"`
			Importing      json.RawMessage `json:"importing"`
		} `json:"change"`
	} `json:"resource_changes"`
	OutputChanges map[string]struct {
		Actions      []string        `json:"actions"`
		After        json.RawMessage `json:"after"`
		AfterUnknown json.RawMessage `json:"after_unknown"`
	} `json:"output_changes"`
}

// planAction is upstream's name of a resource change's actions, "" for no-op.
func planAction(actions []string) string {
	switch {
	case slices.Equal(actions, []string{"create"}):
		return runresult.ActionCreate
	case slices.Equal(actions, []string{"update"}):
		return runresult.ActionUpdate
	case slices.Equal(actions, []string{"delete"}):
		return runresult.ActionDelete
	case slices.Equal(actions, []string{"read"}):
		return runresult.ActionRead
	case slices.Equal(actions, []string{"forget"}):
		return runresult.ActionForget
	case len(actions) == 2 && slices.Contains(actions, "create") && slices.Contains(actions, "delete"):
		return runresult.ActionReplace
	}
	return ""
}

// readPlan reads show -json's output into the document's plan: the counts
// and resources from the resource changes that are not no-ops (a move or
// an import without another change counts as that alone), the output
// changes, and the fingerprint. redact is applied to each address (a
// for_each key can be a value).
func readPlan(show []byte, redact func(string) string) (*runresult.Plan, error) {
	var doc showJSON
	if err := json.Unmarshal(show, &doc); err != nil {
		return nil, fmt.Errorf("the saved plan's JSON (show -json) is not readable: %v", err)
	}
	p := &runresult.Plan{}
	changes := doc.ResourceChanges[:0:0]
	for _, rc := range doc.ResourceChanges {
		a := planAction(rc.Change.Actions)
		moved := rc.PreviousAddress != "" && rc.PreviousAddress != rc.Address
		imported := len(rc.Change.Importing) > 0 && string(rc.Change.Importing) != "null"
		if a == "" && !moved && !imported {
			continue
		}
		changes = append(changes, rc)
		switch a {
		case runresult.ActionCreate:
			p.Create++
		case runresult.ActionUpdate:
			p.Update++
		case runresult.ActionReplace:
			p.Replace++
		case runresult.ActionDelete:
			p.Delete++
		case runresult.ActionForget:
			p.Forget++
		}
		if moved {
			p.Move++
		}
		if imported {
			p.Import++
		}
		if a != "" && a != runresult.ActionRead {
			p.Resources = append(p.Resources, runresult.PlanResource{Address: redact(rc.Address), Action: a})
		}
	}
	sort.Slice(p.Resources, func(i, j int) bool { return p.Resources[i].Address < p.Resources[j].Address })
	if len(p.Resources) > runresult.MaxPlanResources {
		p.Resources, p.Truncated = p.Resources[:runresult.MaxPlanResources], true
	}
	h := sha256.New()
	for _, rc := range sortedBy(changes, func(i int) string { return changes[i].Address }) {
		c := rc.Change
		if err := hashFields(h, "resource", rc.Address, rc.PreviousAddress, fmt.Sprint(c.Actions)); err != nil {
			return nil, err
		}
		if err := hashJSON(h, c.After, c.AfterUnknown, c.AfterSensitive, c.Importing); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(doc.OutputChanges))
	for n, oc := range doc.OutputChanges {
		if planAction(oc.Actions) != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	p.OutputChanges = len(names)
	for _, n := range names {
		oc := doc.OutputChanges[n]
		if err := hashFields(h, "output", n, fmt.Sprint(oc.Actions)); err != nil {
			return nil, err
		}
		if err := hashJSON(h, oc.After, oc.AfterUnknown); err != nil {
			return nil, err
		}
	}
	p.Hash = HashPrefix + hex.EncodeToString(h.Sum(nil))
	return p, nil
}

// sortedBy returns s ordered by key (the addresses are unique in a plan).
func sortedBy[T any](s []T, key func(int) string) []T {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return key(idx[a]) < key(idx[b]) })
	out := make([]T, len(s))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// hashFields writes each field length-prefixed, so no two lists of
// fields hash alike.
func hashFields(h hash.Hash, fields ...string) error {
	for _, f := range fields {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return nil
}

// hashJSON writes each value in a canonical form (object keys sorted,
// numbers as written), length-prefixed: a re-plan that prints the same
// values in another order hashes alike.
func hashJSON(h hash.Hash, values ...json.RawMessage) error {
	for _, v := range values {
		canon := []byte("null")
		if len(bytes.TrimSpace(v)) > 0 {
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			var x any
			if err := d.Decode(&x); err != nil {
				return fmt.Errorf("the saved plan's JSON (show -json) is not readable: %v", err)
			}
			var err error
			if canon, err = json.Marshal(x); err != nil {
				return fmt.Errorf("the saved plan's JSON (show -json): %v", err)
			}
		}
		_ = hashFields(h, string(canon))
	}
	return nil
}

// showBuffer keeps show -json's output, at most maxShowBytes of it.
type showBuffer struct {
	buf  bytes.Buffer
	over bool
}

func (b *showBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > maxShowBytes {
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// readPlan records the saved plan read from show's output in the
// document.
func (r *report) readPlan(show *showBuffer) error {
	if show.over {
		return otherErr("the saved plan's JSON (show -json) is over %d bytes", maxShowBytes)
	}
	p, err := readPlan(show.buf.Bytes(), r.redactor.Redact)
	if err != nil {
		return otherErr("%v", err)
	}
	r.result.Plan = p
	return nil
}

// gate says why the saved plan is not applied, with the kind the run
// then ends with: with --expect-plan, a plan that is not the approved one
// (plan-changed); with --guard-deletes, a plan that deletes or replaces
// resources (destructive, upstream A3-64). "" when the saved plan is
// applied.
func gate(cfg config, rep *report) (string, runresult.Kind) {
	p := rep.result.Plan
	switch {
	case p == nil && cfg.guardDeletes:
		return "the saved plan was not read: nothing applied (SPEC O8)", runresult.KindDestructive
	case p == nil:
		return "the saved plan was not read: nothing applied (SPEC O8)", runresult.KindPlanChanged
	case cfg.guardDeletes && p.Delete+p.Replace > 0:
		return fmt.Sprintf("the plan deletes %d and replaces %d resources: nothing applied; the plan (fingerprint %s) waits for approval as a Destructive TerraformPlan (SPEC O8)", p.Delete, p.Replace, p.Hash), runresult.KindDestructive
	case cfg.guardDeletes:
		return "", ""
	case p.Hash != cfg.expectPlan:
		return fmt.Sprintf("the plan changed: its fingerprint is %s, the approved plan's %s: nothing applied; a new plan waits for approval (SPEC O8)", p.Hash, cfg.expectPlan), runresult.KindPlanChanged
	}
	return "", ""
}

package runresult

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/captf/captf/pkg/bounded"
)

// Version is the version of the document this package writes and reads. A
// document of another version is refused: a manager older than its runner
// reports the run without its details rather than misread them.
const Version = 1

// Bounds of a document. A [Result.Marshal] output is never longer than
// MaxBytes, whatever the Result holds: the tail is shortened first.
const (
	// MaxBytes is the most a document takes: the kubelet keeps at most 4096
	// bytes of a container's termination message.
	MaxBytes = 4096
	// MaxTail bounds the error tail.
	MaxTail = 2048
	// MaxImage bounds the image reference (the CRD's spec.source.image
	// bound).
	MaxImage = 1024
	// MaxRuntime bounds the runtime version line ("Terraform v1.9.5",
	// "OpenTofu v1.12.6").
	MaxRuntime = 128
	// MaxSteps bounds the steps.
	MaxSteps = 8
	// MaxCount bounds each planned change count.
	MaxCount = 1 << 24
	// MaxDurationMilliseconds bounds a step's duration: 10 days, past any
	// Job deadline (SPEC J4 allows a day).
	MaxDurationMilliseconds = 10 * 24 * 3600 * 1000
	// MaxDriftResources bounds the drifted resource addresses a document
	// names (SPEC O7); the counts cover them all.
	MaxDriftResources = 16
	// MaxAddress bounds one resource address.
	MaxAddress = 256
	// MaxPlanResources bounds the resources with their action a plan
	// document names (SPEC O8); the counts cover them all and Truncated
	// says some were left out.
	MaxPlanResources = 16
	// MaxPlanHash bounds a plan's fingerprint (the TerraformPlan's
	// spec.planHash bound).
	MaxPlanHash = 128
)

// Operations.
const (
	OperationApply   = "apply"
	OperationDestroy = "destroy"
	// OperationDrift refreshes the state and plans without applying
	// (SPEC O7, upstream A3-54).
	OperationDrift = "drift"
	// OperationRestore pushes a state backup back into the backend
	// (SPEC O5, upstream A3-44, A3-56).
	OperationRestore = "restore"
	// OperationPlan plans a change and describes it without applying
	// (SPEC O8, upstream A3-55): the plan of a TerraformPlan.
	OperationPlan = "plan"
)

var operations = []string{OperationApply, OperationDestroy, OperationDrift, OperationRestore, OperationPlan}

// Step names: the runner's own preparation (copying the module, writing
// the variables; a failure here is the runner's or the image's), then
// Terraform's steps.
const (
	StepSetup   = "setup"
	StepInit    = "init"
	StepApply   = "apply"
	StepDestroy = "destroy"
	// StepRefresh is a drift run's `apply -refresh-only`: the state takes
	// in what changed outside Terraform; the infrastructure is untouched.
	StepRefresh = "refresh"
	// StepPlan is a drift run's `plan -refresh=false -detailed-exitcode`:
	// exit code 2 is drift found, not a failure.
	StepPlan = "plan"
	// StepStatePush is a restore's `state push -force` of the backup (SPEC
	// O5).
	StepStatePush = "state-push"
	// StepStateList is a restore's `state list` after the push: the
	// restored state reads back.
	StepStateList = "state-list"
	// StepShow is `show -json` of a saved plan (SPEC O8): read by the
	// runner for the plan's summary and fingerprint, never logged.
	StepShow = "show"
)

var steps = []string{StepSetup, StepInit, StepApply, StepDestroy, StepRefresh, StepPlan, StepStatePush, StepStateList, StepShow}

// Kind is what ended a run that did not succeed.
type Kind string

const (
	// KindStep: a Terraform step exited with a non-zero code; Step names
	// it and Tail holds the end of its error output.
	KindStep Kind = "step"
	// KindImageLayout: the image is not a module image: no module
	// directory, no Terraform configuration in it, or no Terraform binary
	// (upstream's image-layout, SPEC O2: ImageInvalid).
	KindImageLayout Kind = "image-layout"
	// KindInterrupted: a stop request (SIGTERM, SIGINT: the pod was
	// deleted, evicted, or its node shut down) ended the run (SPEC O2).
	KindInterrupted Kind = "interrupted"
	// KindRunner: the runner could not run Terraform for another reason:
	// bad flags, variables or inputs, a working copy it could not make.
	KindRunner Kind = "runner"
	// KindPlanChanged: an apply run with --expect-plan planned again and
	// the plan's fingerprint was not the approved one: nothing was
	// applied (SPEC O8, upstream's plan-changed). Not a failure of the
	// module: the manager makes a new plan.
	KindPlanChanged Kind = "plan-changed"
	// KindDestructive: an apply run with --guard-deletes planned to delete
	// or replace resources: nothing was applied (SPEC O8's destructive
	// guard, upstream A3-64). Not a failure of the module: the manager
	// makes a Destructive plan that waits for approval.
	KindDestructive Kind = "destructive"
)

var kinds = []Kind{KindStep, KindImageLayout, KindInterrupted, KindRunner, KindPlanChanged, KindDestructive}

// Result is the document.
type Result struct {
	// Version is [Version].
	Version int `json:"version"`
	// Operation is apply, destroy, drift or restore.
	Operation string `json:"operation"`
	// Image is the module image the Job ran (the runner's --image).
	Image string `json:"image,omitempty"`
	// Runtime is the first line of `terraform version` (or `tofu
	// version`), "" when it could not be read.
	Runtime string `json:"runtime,omitempty"`
	// Steps are the steps that ran, in order.
	Steps []Step `json:"steps,omitempty"`
	// Changes are the planned changes of the apply or destroy step, when
	// Terraform printed its plan summary.
	Changes *Changes `json:"changes,omitempty"`
	// Drift is what a drift run's plan would change to put the
	// infrastructure back as the module says (SPEC O7); nil when its plan
	// printed no summary.
	Drift *Drift `json:"drift,omitempty"`
	// Plan is the saved plan of a plan run, or of an apply run with
	// --expect-plan (SPEC O8): its summary and fingerprint; nil when no
	// plan was read.
	Plan *Plan `json:"plan,omitempty"`
	// Error says why the run did not succeed; nil when it did.
	Error *Error `json:"error,omitempty"`
}

// Step is one step that ran.
type Step struct {
	Name                 string `json:"name"`
	ExitCode             int    `json:"exitCode"`
	DurationMilliseconds int64  `json:"durationMilliseconds"`
}

// Changes are planned changes, in upstream's words (A1-81): a replacement
// counts once, as Replace, not as a create and a delete.
type Changes struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
}

// Drift is a drift run's plan: its counts, and the addresses of the
// resources it would change (A1-81). Addresses only, never a value: at
// most MaxDriftResources of them, in plan order, each at most MaxAddress
// bytes.
type Drift struct {
	Changes
	Resources []string `json:"resources,omitempty"`
}

// Found reports whether d holds drift.
func (d *Drift) Found() bool {
	return d != nil && d.Create+d.Update+d.Replace+d.Delete > 0
}

// Error is why a run did not succeed.
type Error struct {
	Kind Kind `json:"kind"`
	// Step is the step that failed or was interrupted, "" when none ran.
	Step string `json:"step,omitempty"`
	// Tail is the redacted end of the failure's error output.
	Tail string `json:"tail,omitempty"`
}

// Failed reports whether r says the run did not succeed.
func (r *Result) Failed() bool { return r != nil && r.Error != nil }

// Validate checks every field against the bounds and sets of this package.
// Its errors name the field, never its value.
func (r *Result) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if r.Version != Version {
		bad("version is not %d", Version)
	}
	if !slices.Contains(operations, r.Operation) {
		bad("operation is not %s, %s, %s, %s or %s", OperationApply, OperationDestroy, OperationDrift, OperationRestore, OperationPlan)
	}
	if !line(r.Image, MaxImage) {
		bad("image is over %d bytes or holds control characters", MaxImage)
	}
	if !line(r.Runtime, MaxRuntime) {
		bad("runtime is over %d bytes or holds control characters", MaxRuntime)
	}
	if len(r.Steps) > MaxSteps {
		bad("more than %d steps", MaxSteps)
	}
	for i, s := range r.Steps {
		if !slices.Contains(steps, s.Name) {
			bad("steps[%d].name is not a step", i)
		}
		if s.ExitCode < 0 || s.ExitCode > 255 {
			bad("steps[%d].exitCode is not 0-255", i)
		}
		if s.DurationMilliseconds < 0 || s.DurationMilliseconds > MaxDurationMilliseconds {
			bad("steps[%d].durationMilliseconds is out of range", i)
		}
	}
	if c := r.Changes; c != nil && !c.valid() {
		bad("changes holds a count out of range")
	}
	if d := r.Drift; d != nil {
		if !d.Changes.valid() {
			bad("drift holds a count out of range")
		}
		if len(d.Resources) > MaxDriftResources {
			bad("drift.resources holds more than %d addresses", MaxDriftResources)
		}
		for i, a := range d.Resources {
			if a == "" || !line(a, MaxAddress) {
				bad("drift.resources[%d] is empty, over %d bytes or holds control characters", i, MaxAddress)
			}
		}
	}
	if p := r.Plan; p != nil {
		errs = append(errs, p.validate()...)
	}
	if e := r.Error; e != nil {
		if !slices.Contains(kinds, e.Kind) {
			bad("error.kind is not a kind")
		}
		if e.Step != "" && !slices.Contains(steps, e.Step) {
			bad("error.step is not a step")
		}
		if len(e.Tail) > MaxTail || !utf8.ValidString(e.Tail) || Clean(e.Tail) != e.Tail {
			bad("error.tail is over %d bytes or holds control characters", MaxTail)
		}
	}
	return join(errs)
}

func (c Changes) valid() bool {
	for _, n := range []int{c.Create, c.Update, c.Replace, c.Delete} {
		if n < 0 || n > MaxCount {
			return false
		}
	}
	return true
}

// join joins errs on one line, "" when none: the message may reach a
// condition.
func join(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msg := errs[0].Error()
	for _, e := range errs[1:] {
		msg += "; " + e.Error()
	}
	return errors.New(msg)
}

// line reports whether s is at most max bytes of valid UTF-8 without
// control characters.
func line(s string, max int) bool {
	return len(s) <= max && utf8.ValidString(s) && cleanLine(s) == s
}

// Marshal validates r and returns it as JSON of at most [MaxBytes]. The
// tail and the image are cleaned and shortened first, on a copy: a Result
// whose other fields are valid always marshals.
func (r *Result) Marshal() ([]byte, error) {
	c := *r
	c.Version = Version
	c.Image = Shorten(cleanLine(c.Image), MaxImage)
	c.Runtime = Shorten(cleanLine(c.Runtime), MaxRuntime)
	if r.Error != nil {
		e := *r.Error
		e.Tail = Shorten(Clean(e.Tail), MaxTail)
		c.Error = &e
	}
	if r.Drift != nil {
		d := *r.Drift
		d.Resources = nil
		for _, a := range r.Drift.Resources {
			if a = Shorten(cleanLine(a), MaxAddress); a != "" && len(d.Resources) < MaxDriftResources {
				d.Resources = append(d.Resources, a)
			}
		}
		c.Drift = &d
	}
	if r.Plan != nil {
		c.Plan = r.Plan.cleaned()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	for {
		b, err := json.Marshal(&c)
		if err != nil {
			return nil, err
		}
		if len(b) <= MaxBytes {
			return b, nil
		}
		// Escapes can make the JSON longer than the text: give up tail,
		// then drifted addresses (the counts stay), then image, by the
		// excess until it fits.
		over := len(b) - MaxBytes
		switch {
		case c.Error != nil && c.Error.Tail != "":
			c.Error.Tail = Shorten(c.Error.Tail, max(0, len(c.Error.Tail)-over-16))
		case c.Drift != nil && len(c.Drift.Resources) > 0:
			c.Drift.Resources = c.Drift.Resources[:len(c.Drift.Resources)-1]
		case c.Plan != nil && len(c.Plan.Resources) > 0:
			c.Plan.Resources, c.Plan.Truncated = c.Plan.Resources[:len(c.Plan.Resources)-1], true
		case c.Image != "":
			c.Image = Shorten(c.Image, max(0, len(c.Image)-over-16))
		default:
			return nil, fmt.Errorf("the result document is %d bytes, over %d", len(b), MaxBytes)
		}
	}
}

// limits are the decoder's bounds: a document of MaxBytes, with room for
// every field and no more (SPEC B10).
var limits = bounded.Limits{
	MaxInput:  MaxBytes,
	MaxSize:   MaxBytes,
	MaxDepth:  5,
	MaxValues: 192,
	MaxToken:  MaxBytes,
	MaxKey:    64,
}

// Unmarshal decodes a termination message into a Result: within
// pkg/bounded's limits, then validated. An empty message is
// [ErrNoDocument]. No error quotes data.
func Unmarshal(data []byte) (*Result, error) {
	if len(data) == 0 {
		return nil, ErrNoDocument
	}
	var r Result
	if err := bounded.Unmarshal(data, &r, limits); err != nil {
		return nil, fmt.Errorf("the result document is not readable: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("the result document is not valid: %w", err)
	}
	if len(r.Steps) == 0 {
		r.Steps = nil // "steps": [] reads as none
	}
	return &r, nil
}

// ErrNoDocument: the termination message is empty (a runner older than
// this document, or one killed before it wrote it).
var ErrNoDocument = errors.New("no result document")

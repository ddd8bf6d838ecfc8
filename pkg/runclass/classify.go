package runclass

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
)

// Cause says what interrupted a run, for the interruption metric (a fixed
// set: no object is named).
type Cause string

const (
	// CauseDisruption: the control plane evicted or preempted the pod, or
	// its node was lost (DisruptionTarget).
	CauseDisruption Cause = "disruption"
	// CausePodDeleted: the pod was deleted, or is gone.
	CausePodDeleted Cause = "pod_deleted"
	// CauseStopped: the runner was stopped by a signal.
	CauseStopped Cause = "stopped"
	// CauseJobDeleted: the Job was deleted while it ran.
	CauseJobDeleted Cause = "job_deleted"
)

// Causes are every Cause, for metrics.
var Causes = []Cause{CauseDisruption, CausePodDeleted, CauseStopped, CauseJobDeleted}

// Document says what became of the result document, for metrics.
type Document string

const (
	// DocumentRead: read and valid.
	DocumentRead Document = "read"
	// DocumentNone: the termination message was empty.
	DocumentNone Document = "none"
	// DocumentInvalid: not a valid document (refused whole).
	DocumentInvalid Document = "invalid"
	// DocumentUnread: no single pod of the Job could be read.
	DocumentUnread Document = "unread"
)

// Documents are every Document, for metrics.
var Documents = []Document{DocumentRead, DocumentNone, DocumentInvalid, DocumentUnread}

// MaxSummary bounds Error.Summary (status.lastRun.error.summary in SPEC O1;
// upstream A1-80: 512 bytes).
const MaxSummary = v1alpha1.MaxRunErrorSummary

// Run is how a run ended.
type Run struct {
	Outcome Outcome
	// Kind, Step, ExitCode and Summary say why it did not succeed.
	Kind     ErrorKind
	Step     string
	ExitCode *int32
	Summary  string
	// Cause is what interrupted an Interrupted run.
	Cause Cause
	// Result is the runner's document, nil when none was read.
	Result *runresult.Result
	// Document says whether it was read.
	Document Document
	// Image names the image that cannot be pulled (Kind image-pull).
	Image string
}

// Finished classifies a finished Job ([jobs.Finished]) from its
// conditions and pod, its own pod's facts (SPEC O1, O2). The rows, in
// order:
//
//   - Complete: Succeeded.
//   - Failed with reason DeadlineExceeded: DeadlineExceeded.
//   - Failed through the pod failure policy on the runner's stopped exit
//     code: Interrupted (the pod deleted or stopped; its facts refine the
//     cause when it can still be read). The Job keeps the reason after the
//     pod is gone, so unlike the rows below this holds without the pod.
//   - Failed through the pod failure policy (DisruptionTarget):
//     Interrupted (disruption).
//   - The pods could not be read, or more than one claims the Job: Failed,
//     unknown; nothing of a pod is trusted.
//   - No pod: Failed, unknown, from the Job's own status. The pod may be
//     gone for many reasons (pruning, the pod garbage collector, a node
//     removed after the run ended), so this is never an interruption: an
//     interruption retries at once, and a finished Job whose pod went
//     would loop without its backoff.
//   - The pod has DisruptionTarget: Interrupted (disruption).
//   - The pod is being deleted: Interrupted (pod_deleted).
//   - The document says interrupted (a signal stopped the runner):
//     Interrupted (stopped).
//   - A container waits for an image it cannot pull: Failed, image-pull.
//   - The document says why: Failed with its kind (step, image-layout,
//     runner), step, exit code and tail.
//   - Otherwise: Failed, unknown, with what the kubelet said.
func Finished(job *batchv1.Job, pod Pod) Run {
	outcome, msg := jobs.Status(job)
	doc, docNote, document := readDocument(pod)
	run := Run{Result: doc, Document: document}
	switch outcome {
	case jobs.Succeeded:
		run.Outcome = Succeeded
		return run
	case jobs.DeadlineExceeded:
		run.Outcome, run.Kind = DeadlineExceeded, ErrorDeadline
		run.Summary = "the Job ran past spec.jobs.activeDeadlineSeconds"
		if msg != "" {
			run.Summary += " (" + bounded(msg, 256) + ")"
		}
		if doc != nil && doc.Error != nil {
			run.Step = doc.Error.Step
		}
		return run
	}
	run.Outcome = Failed
	switch {
	case jobs.StoppedByExitCode(job):
		return stopped(run, pod, doc, msg)
	case jobs.Disrupted(job):
		why := "the Job's pod was disrupted: evicted, preempted, or its node was lost"
		if pod.Claims == 1 && pod.Disruption != "" {
			why += " (" + pod.Disruption + ")"
		}
		return interrupted(run, CauseDisruption, why)
	case pod.Unread:
		return unknown(run, "the Job's pod could not be read")
	case pod.Claims > 1:
		return unknown(run, fmt.Sprintf("%d pods claim the Job, so none of them is read", pod.Claims))
	case pod.Claims == 0:
		why := "the Job's pod is gone (pruned, or collected), so no result document was read"
		if msg != "" {
			why += "; the Job says: " + bounded(msg, 256)
		}
		return unknown(run, why)
	}
	if r, ok := podInterruption(run, pod, doc); ok {
		return r
	}
	switch {
	case pod.PullFailure != nil:
		run.Kind, run.Image = ErrorImagePull, pod.PullFailure.Image
		run.Summary = bounded(PullMessage(pod.PullFailure), MaxSummary)
		return run
	case doc != nil && doc.Error != nil:
		run.Kind = kindOf(doc.Error.Kind)
		run.Step = doc.Error.Step
		run.Summary = runresult.Shorten(doc.Error.Tail, MaxSummary)
		for _, s := range doc.Steps {
			if s.Name == doc.Error.Step {
				run.ExitCode = ptr.To(int32(s.ExitCode))
			}
		}
		return run
	}
	var why []string
	if docNote != "" {
		why = append(why, docNote)
	}
	if t := pod.InitTerminated; t != nil {
		why = append(why, fmt.Sprintf("init container %s failed: %s, exit code %d", jobs.InitContainerName, t.Reason, t.ExitCode))
	}
	if t := pod.Terminated; t != nil {
		why = append(why, fmt.Sprintf("container %s terminated: %s, exit code %d", jobs.ContainerName, t.Reason, t.ExitCode))
		run.ExitCode = ptr.To(min(max(t.ExitCode, 0), 255))
	}
	return unknown(run, strings.Join(why, "; "))
}

// Vanished is a Job that was deleted while it ran (upstream A3-89): an
// interruption, so its action stays due and runs again at once.
func Vanished(action v1alpha1.JobAction) Run {
	return interrupted(Run{Outcome: Failed, Document: DocumentUnread}, CauseJobDeleted,
		fmt.Sprintf("the Job was deleted while it ran; its %s stays due and runs again", action))
}

// stopped is a Job its pod failure policy failed on the runner's stopped
// exit code (SPEC O2): a stop request ended the run, most often the pod's
// deletion, which leaves no pod to read. The pod's facts, when it can still
// be read, say more: a disruption, a deletion, the runner's own words.
func stopped(run Run, pod Pod, doc *runresult.Result, msg string) Run {
	if r, ok := podInterruption(run, pod, doc); pod.Claims == 1 && ok {
		return r
	}
	return interrupted(run, CausePodDeleted, "the Job's pod was stopped while it ran (deleted, or its node shut down): "+bounded(msg, 256))
}

// podInterruption is what the Job's one pod says interrupted its run: the
// DisruptionTarget condition, its deletion, or the runner's document
// saying a signal stopped it; ok is false when it says none of these.
func podInterruption(run Run, pod Pod, doc *runresult.Result) (Run, bool) {
	switch {
	case pod.Disruption != "":
		return interrupted(run, CauseDisruption, "the Job's pod was disrupted ("+pod.Disruption+")"), true
	case pod.Deleted:
		return interrupted(run, CausePodDeleted, "the Job's pod was deleted while it ran"), true
	case doc != nil && doc.Error != nil && doc.Error.Kind == runresult.KindInterrupted:
		run.Step = doc.Error.Step
		return interrupted(run, CauseStopped, doc.Error.Tail), true
	}
	return run, false
}

func interrupted(run Run, cause Cause, why string) Run {
	run.Outcome, run.Kind, run.Cause = Interrupted, ErrorInterrupted, cause
	run.Summary = bounded(why, MaxSummary)
	return run
}

func unknown(run Run, why string) Run {
	run.Kind = ErrorUnknown
	run.Summary = bounded(why, MaxSummary)
	if run.Summary == "" {
		run.Summary = "the Job failed and neither its pod nor a result document says why"
	}
	return run
}

// readDocument decodes the pod's termination message.
func readDocument(pod Pod) (*runresult.Result, string, Document) {
	if pod.Unread || pod.Claims != 1 {
		return nil, "", DocumentUnread
	}
	r, err := runresult.Unmarshal(pod.Message)
	switch {
	case errors.Is(err, runresult.ErrNoDocument):
		return nil, "no result document", DocumentNone
	case err != nil:
		return nil, bounded(err.Error(), 256), DocumentInvalid
	}
	return r, "", DocumentRead
}

func kindOf(k runresult.Kind) ErrorKind {
	switch k {
	case runresult.KindStep:
		return ErrorStep
	case runresult.KindImageLayout:
		return ErrorImageLayout
	case runresult.KindInterrupted:
		return ErrorInterrupted
	case runresult.KindRunner:
		return ErrorRunner
	case runresult.KindPlanChanged:
		return ErrorPlanChanged
	case runresult.KindDestructive:
		return ErrorBlocked
	}
	return ErrorUnknown
}

// NewRecord is status.lastRun for the run rec (as status.lastApply or
// status.lastDestroy holds it) of action, classified as run (SPEC O1).
// Its outcome is the record's, which the manager decides from (T7): the
// classification adds why, never another outcome (an interrupted run's
// record stays Failed; the manager retries it at once from lastRun's
// error kind, SPEC O2).
func NewRecord(action v1alpha1.JobAction, rec *v1alpha1.RunRecord, run Run) *Record {
	out := &Record{
		Job: rec.JobName, Operation: action, Generation: rec.Generation, Attempt: rec.Attempt,
		Outcome: rec.Outcome, FinishTime: metav1.NewTime(rec.FinishTime.Time),
	}
	if d := run.Result; d != nil {
		out.Image, out.RuntimeVersion = d.Image, d.Runtime
		for _, s := range d.Steps {
			out.Steps = append(out.Steps, Step{Name: s.Name, ExitCode: int32(s.ExitCode), DurationMilliseconds: s.DurationMilliseconds})
		}
		if c := d.Changes; c != nil {
			out.Changes = &Changes{Create: int32(c.Create), Update: int32(c.Update), Replace: int32(c.Replace), Delete: int32(c.Delete)}
		}
		if dr := d.Drift; dr != nil && action == v1alpha1.JobActionDrift {
			// O7: counts and addresses, bounded by the document.
			out.Drift = &v1alpha1.RunDrift{
				RunChanges: Changes{Create: int32(dr.Create), Update: int32(dr.Update), Replace: int32(dr.Replace), Delete: int32(dr.Delete)},
				Resources:  slices.Clone(dr.Resources),
			}
		}
	}
	if run.Image != "" {
		out.Image = run.Image
	}
	if run.Kind != "" && rec.Outcome != v1alpha1.RunSucceeded {
		out.Error = &Error{Kind: run.Kind, Step: run.Step, ExitCode: run.ExitCode, Summary: run.Summary}
	}
	return out
}

// Gone classifies a recorded run whose Job is gone (pruned, deleted, a
// TTL) before the manager read it: only the record says how it ended.
// Never an interruption (see [Finished]).
func Gone(rec *v1alpha1.RunRecord) Run {
	run := Run{Outcome: Outcome(rec.Outcome), Document: DocumentUnread}
	switch rec.Outcome {
	case v1alpha1.RunSucceeded:
		return run
	case v1alpha1.RunDeadlineExceeded:
		run.Kind, run.Summary = ErrorDeadline, "the Job ran past spec.jobs.activeDeadlineSeconds; the Job is gone, so no result document was read"
		return run
	}
	return unknown(run, "the Job is gone (pruned, deleted, or its TTL passed), so no result document was read")
}

// Headline words why a run did not succeed in one line, for a condition's
// message and an event: the step, the exit code and the summary's first
// line. "" for a success.
func Headline(l *Record) string {
	if l == nil || l.Error == nil {
		return ""
	}
	e := l.Error
	var b strings.Builder
	switch e.Kind {
	case ErrorStep:
		fmt.Fprintf(&b, "step %s failed", e.Step)
	case ErrorImageLayout:
		b.WriteString("the image is not a module image")
	case ErrorImagePull:
		b.WriteString("an image cannot be pulled")
	case ErrorInterrupted:
		b.WriteString("interrupted")
	case ErrorDeadline:
		b.WriteString("deadline exceeded")
	case ErrorRunner:
		b.WriteString("the runner failed")
	case ErrorPlanChanged:
		b.WriteString("applied nothing: the plan is not the approved one")
	case ErrorBlocked, v1alpha1.RunErrorDestructive:
		b.WriteString("applied nothing: the plan deletes or replaces resources")
	default:
		b.WriteString("failed")
	}
	if e.ExitCode != nil {
		fmt.Fprintf(&b, " with exit code %d", *e.ExitCode)
	}
	if first := firstLine(e.Summary); first != "" {
		b.WriteString(": " + first)
	}
	return b.String()
}

// firstLine is the first non-empty line of s, at most 256 bytes.
func firstLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			return runresult.Shorten(l, 256)
		}
	}
	return ""
}

// Plan words planned changes: "1 to create, 0 to update, 0 to replace, 0
// to delete".
func Plan(c *Changes) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete", c.Create, c.Update, c.Replace, c.Delete)
}

// Summary words a recorded run for the RunFinished event: what ran, how
// it ended, and its planned changes or why it failed.
func Summary(l *Record) string {
	what := fmt.Sprintf("%s Job %s (generation %d, attempt %d)", l.Operation, l.Job, l.Generation, l.Attempt)
	var b strings.Builder
	switch l.Outcome {
	case v1alpha1.RunSucceeded:
		b.WriteString(what + " succeeded")
	case v1alpha1.RunDeadlineExceeded:
		b.WriteString(what + " ran past its deadline")
	default:
		b.WriteString(what + " failed")
	}
	if d := durationOf(l.Steps); d > 0 {
		fmt.Fprintf(&b, " after %s", d.Round(time.Second))
	}
	if p := Plan(l.Changes); p != "" {
		b.WriteString("; planned " + p)
	}
	if h := Headline(l); h != "" {
		b.WriteString("; " + h)
	}
	return b.String()
}

func durationOf(steps []Step) time.Duration {
	var ms int64
	for _, s := range steps {
		ms += s.DurationMilliseconds
	}
	return time.Duration(ms) * time.Millisecond
}

package metrics

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Job caps (SPEC O4). Labels come from fixed sets: the class (destroy,
// apply, background) and the cap that holds the Job (global, cluster);
// no object, cluster or namespace is named.
var (
	// JobsWaitingForSlot is the number of Jobs that wait for a slot now.
	JobsWaitingForSlot = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "captf_jobs_waiting_for_slot",
		Help: "Jobs that are due but wait for a slot (ApplyJobSucceeded=Unknown/WaitingForJobSlot), by class (destroy, apply, background: drift and refresh) and the cap that holds them: " +
			"global (--max-active-jobs) or cluster (spec.maxActiveJobs, else --cluster-max-active-jobs). Leader only.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class", "cap"})

	// JobSlotWaits counts the waits that began.
	JobSlotWaits = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "captf_job_slot_waits_total",
		Help:           "Jobs that had to wait for a slot, counted when the wait began, by class and the cap that held them first (global, cluster).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class", "cap"})

	// JobSlotWaitSeconds is how long Jobs waited for their slot.
	JobSlotWaitSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "captf_job_slot_wait_seconds",
		Help:           "How long a Job that waited for a slot waited until it got one, by class. Jobs that never waited are not observed.",
		Buckets:        []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200},
		StabilityLevel: metrics.ALPHA,
	}, []string{"class"})
)

// Classes and caps of the Job cap metrics (pkg/slots names them).
var (
	slotClasses = []string{"destroy", "apply", "background"}
	slotCaps    = []string{"global", "cluster"}
)

// registerSlots registers the Job cap metrics; every series exists from
// the start at 0, so an alert on a ratio or an absence works at once.
func registerSlots() {
	legacyregistry.MustRegister(JobsWaitingForSlot, JobSlotWaits, JobSlotWaitSeconds)
	for _, class := range slotClasses {
		for _, c := range slotCaps {
			JobsWaitingForSlot.WithLabelValues(class, c)
			JobSlotWaits.WithLabelValues(class, c)
		}
		JobSlotWaitSeconds.WithLabelValues(class)
	}
}

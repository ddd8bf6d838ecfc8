// Package drift decides when an object's drift check is due (SPEC O7,
// upstream A1-95, A1-96, A3-54, A3-59, A3-62): pure code, no client, no
// clock of its own. The workload controller gathers the object's interval,
// its UID and its newest finished run, asks [Decide], and either starts a
// drift Job (at slots.Background priority, SPEC O4) or requeues the key
// for the time [Decide] returns; it never polls.
//
// The rules:
//
//   - the interval is the object's spec.drift.intervalSeconds, else its
//     cluster's spec.defaults.drift.intervalSeconds (machines and pools),
//     else --drift-default-interval (30m); 0 turns drift checks off
//     ([Interval]);
//   - a check is never due while the newest finished run of the object
//     (apply, destroy or drift) is younger than the interval: a run that
//     just finished has seen the infrastructure, and 1,000 objects cost
//     at most the Jobs the interval implies;
//   - each object is due a fixed, deterministic jitter after that
//     ([Jitter]: hashed from its UID, below [MaxJitterPercent] of the
//     interval), so objects applied together do not check together, and a
//     manager restart changes no object's schedule;
//   - Remediate applies after a drift found, at most [MaxRemediations] in a
//     row (upstream's failed-history limit, 3; [Remediate]).
package drift

// Package sourcewatch pushes rotations (SPEC P2): it keeps one
// field-selected watch (metadata.name=<name> in its namespace) per distinct
// source Secret that an identity's spec.secretRef names, and when a source
// changes it calls OnChange for every identity naming it, which enqueues the
// identity's users and the identity itself. The periods (R2, S4) remain the
// bound when a watch is down.
//
// Watches follow the identities: one starts when the first identity names a
// Secret and stops when the last one stops naming it (deleted, or its
// secretRef changed); identities sharing a source share its watch. The
// controller runs in the leader only, like the controllers it feeds.
//
// What a watch caches (SPEC B1): a Secret reduced to its name, namespace, UID,
// resourceVersion and a fingerprint, the SHA-256 of what decides a mirror's
// content or the source's usability: its data (by the hash M4 uses), its type,
// the label captf.io/mirrored (C2) and the consent label and annotation (C1).
// No data, no other metadata. A change is a different fingerprint: an update
// that changes none of these (another label, an annotation, a no-op update)
// and a relist that finds the same Secret enqueue nothing. A Secret created,
// deleted, or deleted and recreated while the watch was down counts as a change.
//
// A new watch's initial list is its baseline and enqueues no user: the
// identity's creation, or its secretRef change, enqueued them already (I4,
// R4). A watch started for an identity that came (or changed secretRef)
// after start-up enqueues the identity alone once its list is in, so the
// identity controller compares that read with the mirrors (S4): a rotation
// between the users' reads and the list is not missed.
//
// Errors: the reflector under each watch retries the list and the watch with
// backoff for as long as the watch is wanted; every failure is logged and
// counted in captf_source_watch_errors_total, and never stops the manager.
package sourcewatch

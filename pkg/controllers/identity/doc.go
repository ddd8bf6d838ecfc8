// Package identity is the TerraformClusterIdentity status controller (SPEC
// S1-S4, V5, V6, B2, B8, section 13, section 14). It re-reads each
// identity's source Secret uncached every --identity-resync (every 30s, or
// the resync if shorter, while not Ready) and on every change, and reports:
//
//   - Ready: SecretFound, SecretNotFound (S1), or the section 14 reasons
//     NotOptedIn (C1), SourceRefused (C2), CredentialsIncomplete (C3), with
//     an event on change;
//   - CredentialsValid: the hygiene report on the source's keys (C4);
//   - RotationComplete and status.rotation: whether the current credentials
//     have reached every mirror and no running Job uses older ones (C5);
//   - status.namespaces: the namespaces holding a real mirror (S2);
//   - status.mirrors and MirrorsCurrent: how many mirrors carry the current
//     source hash, are stale, or are blocked by a foreign Secret (section
//     13). Only mirrors and Jobs of live users count (B2).
//
// When a mirror's hash differs from the source it enqueues that mirror's
// users (S4), so a rotation lands within --identity-resync: one batch per
// pass, stamped with the ticket of the source read that found the mirrors
// stale, so their reconciles reuse that read (P1). It deletes
// mirrors in namespaces the identity no longer allows, every mirror of an
// identity that is gone (V5), and every mirror of a source that may not be
// used (C1, C2); the V5 revocation happens even when the source cannot be
// read (B8). It never writes mirror data itself, never touches the source
// (V6), and writes status only when it changed (S3).
//
// One pass reads top to bottom (sync.go): gather the inputs from the caches
// and one uncached source read, decide the new status and the actions in
// one pure function (compute.go), apply the deletions and enqueues, emit
// events from one before/after comparison, and write the status when it
// differs from what is stored.
package identity

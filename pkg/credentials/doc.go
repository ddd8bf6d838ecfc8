// Package credentials is the pure logic behind captf's credential mirroring:
// no Kubernetes client, no I/O, no logging. Controllers and the admission
// webhook call it with objects they already hold, so every rule below can be
// tested with plain table tests.
//
// The package owns these rules of SPEC.md:
//
//   - SPEC 1.2: which TerraformCluster a machine or pool belongs to
//     ([SelectCluster]).
//   - I1-I3: identity resolution ([ClusterIdentity], [MemberIdentity]). I3
//     holds because resolution reads the cluster's current values on every
//     call; nothing is cached here.
//   - Section 3, N1-N6: whether an identity's allowedNamespaces allows a
//     namespace ([NamespaceAllowed], [SelectorMatchesEverything]). N5's
//     Namespace informer stays with the callers: they pass the labels in.
//   - A3: whether an allowedNamespaces update widens access and so needs a
//     SubjectAccessReview ([Widens]).
//   - M1: the mirror's name, computed only here ([MirrorName]).
//   - M2, M3: the desired mirror Secret ([DesiredMirror]).
//   - M4: the source hash ([SourceHash]).
//   - M5: owner-reference edits ([OwnerReference], [EnsureOwnerReference],
//     [RemoveOwnerReference], [HasOwnerReference]).
//   - M6: deciding whether a mirror needs a write, and what the write is
//     ([CompareMirror], [ApplyDesired]); when to write is the caller's.
//   - M7: recognising a foreign Secret that must never be modified
//     ([IsForeign]).
//   - P3: a mirror rewrite as one write preconditioned on the version it
//     was planned from, a cache copy or a fresh read ([PlanMirror],
//     [MirrorPatch], [OwnersPatch]); the caller re-reads and re-plans on a
//     Conflict.
package credentials

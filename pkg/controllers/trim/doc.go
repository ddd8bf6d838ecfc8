// Package trim is what the manager's informer caches keep (SPEC B1, B12).
// Every informer the manager runs has [ForCache] as its transform: an object
// enters a cache with only the labels, annotations and status fields some
// controller, the webhook or the index package reads, and without managed
// fields, Secret data or pod templates. A tenant can put any label or
// annotation on its own objects, so a cache that kept whole metadata would
// grow with what tenants choose to store; with these transforms it grows
// with what the manager uses.
//
// The keep-lists are in keep.go, one line per key with who reads it. The
// lists name exact keys, never prefixes: a prefix (captf.io/*) would let a
// tenant fill the cache under it. A key a controller starts to read must be
// added there, or the controller never sees it; TestEveryWellKnownKeyIsClassified
// fails when a label or annotation constant of the API packages is neither
// kept nor listed in NotKept with why.
//
// Kept whole:
//   - Namespace labels: an identity's allowedNamespaces.selector may name any
//     label (N4), and only admins label namespaces.
//   - The status of the four captf kinds: the manager writes it whole through
//     /status from the cached copy, so a field trimmed here would be erased.
//
// A trimmed copy must never be written back as it is: a write built from it
// would erase what the transform dropped. The manager's writes of cached
// objects are therefore patches of the fields it owns (finalizers, the
// Cluster API fields and their annotation, with a resourceVersion
// precondition) or status writes, whose metadata the API server ignores;
// mirrors are rewritten from an uncached read.
//
// What is kept is then interned (intern.go, issue 25): the strings many
// cached objects repeat (names, namespaces, kept label and annotation keys
// and values, owner references' kinds, condition types, reasons and
// messages) point to one shared copy, from a bounded table. No value
// changes, so interning is safe where trimming is not (the status).
//
// Cluster API objects (Cluster, Machine, MachinePool) are read through
// pkg/capi, whose dynamic informers convert them to a typed subset with
// their own keep-lists of labels and annotations (pkg/capi/convert.go);
// [ForCache] leaves objects of types it has no list for as they are but for
// their managed fields, and TestEveryInformerIsTrimmed (pkg/manager) fails
// when the manager starts an informer of such a type.
package trim

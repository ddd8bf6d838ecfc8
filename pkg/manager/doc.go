// Package manager is `captf manager`: it builds the clients and shared
// informers, runs the controllers under leader election, and serves the
// admission webhook (in every replica), /metrics, /healthz and /readyz
// (SPEC section 12). /metrics is served over HTTPS to callers whose token
// passes a TokenReview and a SubjectAccessReview, and never resets (B4,
// metrics_server.go).
//
// Start-up order: clients, informer factories, controllers and webhook
// validators (which request their informers), factories started, HTTP
// servers, then leader election around the controllers only. /readyz turns
// ok once every requested informer has synced.
//
// Shutdown on SIGTERM: the controllers stop taking work and drain their
// queues, the leader Lease is released (only after the controllers have
// stopped, so two leaders never overlap), then the HTTP servers stop.
package manager

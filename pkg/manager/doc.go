// Package manager is `captf manager`: it builds the clients and shared
// informers, runs the controllers under leader election, and serves the
// admission webhook (in every replica), /metrics, /healthz and /readyz
// (SPEC section 12).
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

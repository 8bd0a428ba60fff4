// Package service holds what the example services (publisher, consumer, check) share:
// flag defaults taken from the environment, an HTTP server that fails clearly when its
// port is busy, JSON responses, and a small JSON client for the services' /stats.
//
// # Environment fallbacks
//
// Every flag of a service has an environment variable (STROM_DIR, STROM_TOPIC, STROM_ADDR,
// ...). The precedence is: a flag given on the command line, else the environment variable,
// else the built-in default. The methods of [Env] compute each flag's default from the
// environment, so flag.Parse applies the precedence by itself; a variable that does not
// parse is kept in [Env.Err] and is a startup error, never silently ignored.
//
// # Listening
//
// [Listen] opens the TCP listener before a service does any other work, and a busy port is
// reported as "consumer: listen on 127.0.0.1:7071: address already in use", so two services
// started on the same port fail at once and say why.
//
// # Serving
//
// Every service listens on 127.0.0.1 by default (its --addr flag, or STROM_ADDR, changes
// that) and exposes nothing that writes: its endpoints are GET only (/stats, /metrics,
// /health, the projection's /users/{id}), except the publisher's POST /stop, which only
// stops its sending. [Serve] answers any other method 405 with an Allow header (the
// services register method patterns on an http.ServeMux) and a request body over
// [MaxRequestBodyBytes] (4 KiB) 413, before a handler runs.
package service

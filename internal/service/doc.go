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
package service

// Socket set-up for the connection front end: the public listener, the loopback connection to the
// upstream, the descriptor limit. Linux; every socket non-blocking.
#pragma once

#include <string>

namespace bicache::server::front {

// Binds and listens on host:port (port 0: any free port), non-blocking; returns the descriptor and
// sets *bound_port. Throws Error(kIo) "cannot listen on HOST:PORT: reason".
int Listen(const std::string& host, int port, int* bound_port);

// Starts a non-blocking connect to 127.0.0.1:port; -1 when it failed at once.
int ConnectLoopback(int port);

// Raises the soft limit on open descriptors to the hard limit (each held connection is one).
// Returns the limit in force.
long RaiseFileLimit();

// Reason phrase for the status codes the front answers itself.
const char* ReasonPhrase(int status);

// A complete response with an OpenAI error body {"error":{...}} and "Connection: close".
// 503 also carries "Retry-After: 1".
std::string ErrorResponse(int status, const std::string& message, const std::string& code = "");

}  // namespace bicache::server::front

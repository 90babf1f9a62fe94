// Typed errors used at library API boundaries.
//
// The library never calls exit()/abort() on bad input: every failure on user-supplied data (a
// file, a request, a flag) is thrown as one of these, and front ends (CLI, server) turn them into
// a one-line message or an HTTP 4xx.
#pragma once

#include <stdexcept>
#include <string>

namespace bicache {

enum class ErrorKind {
  kIo,               // file could not be opened / read / mapped
  kFormat,           // malformed file contents (GGUF structure)
  kModel,            // well-formed file, but not a model we can run (missing/mis-shaped tensor...)
  kInvalidArgument,  // bad flag or request parameter
  kUnsupported,      // valid but not implemented (e.g. an unknown tensor type)
  kResource,         // a limit or budget was exceeded
  kCancelled,        // request cancelled by its client
  kInternal,         // a bug: an invariant of our own did not hold
};

const char* ErrorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace bicache

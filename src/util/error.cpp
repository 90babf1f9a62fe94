#include "util/error.h"

namespace bicache {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kIo:
      return "io error";
    case ErrorKind::kFormat:
      return "format error";
    case ErrorKind::kModel:
      return "model error";
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kUnsupported:
      return "unsupported";
    case ErrorKind::kResource:
      return "resource limit";
    case ErrorKind::kCancelled:
      return "cancelled";
    case ErrorKind::kInternal:
      return "internal error";
  }
  return "error";
}

}  // namespace bicache

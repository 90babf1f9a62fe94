#include "cache/prefix_payload.h"

namespace bicache::cache {

// Out of line so the vtable has one home.
PrefixPayload::~PrefixPayload() = default;

}  // namespace bicache::cache

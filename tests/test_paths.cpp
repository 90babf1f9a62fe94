// The source tree's tests/data path, compiled into this file alone (CMakeLists.txt).
#include "test_util.h"

namespace bicache::testing {

std::string DataPath(const std::string& rel) {
  return std::string(BICACHE_TEST_DATA) + "/" + rel;
}

}  // namespace bicache::testing

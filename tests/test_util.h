// Shared helpers for tests: paths to fixtures and small file utilities.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace bicache::testing {

inline std::string DataPath(const std::string& rel) { return std::string(BICACHE_TEST_DATA) + "/" + rel; }

inline std::vector<float> ReadF32File(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), v.size() * sizeof(float));
  return v;
}

}  // namespace bicache::testing

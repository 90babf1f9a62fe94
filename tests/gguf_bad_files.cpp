#include "gguf_bad_files.h"

#include <cstring>

namespace bicache::testing {
namespace {

constexpr uint32_t kU8 = 0, kU32 = 4, kI32 = 5, kBool = 7, kString = 8, kArray = 9;
constexpr uint32_t kF32Type = 0, kQ8_0Type = 8;

// A small valid file: one string key and one F32 tensor "w" of 8 elements.
RawGguf ValidBase() {
  RawGguf g;
  g.kvs.push_back(KvRecord("general.architecture", kString, GgufString("llada")));
  g.tensors.push_back({"w", {8}, std::nullopt, kF32Type, 0});
  g.data = Bytes(32, 0);
  return g;
}

Bytes NestedArray(int depth) {  // depth levels of arrays around one u8
  if (depth == 0) return LeU8(1);
  uint32_t elem_type = depth == 1 ? kU8 : kArray;
  return Concat({LeU32(elem_type), LeU64(1), NestedArray(depth - 1)});
}

}  // namespace

Bytes LeU8(uint8_t v) {
  return Bytes{v};
}
Bytes LeU32(uint32_t v) {
  Bytes b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}
Bytes LeU64(uint64_t v) {
  Bytes b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}
Bytes GgufString(const std::string& s) {
  // Sized up front: vector::insert here trips a GCC 12 -Warray-bounds false positive at -O2.
  Bytes b(8 + s.size());
  uint64_t len = s.size();
  std::memcpy(b.data(), &len, 8);
  if (!s.empty()) std::memcpy(b.data() + 8, s.data(), s.size());
  return b;
}
Bytes Concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes KvRecord(const std::string& key, uint32_t value_type, const Bytes& value) {
  return Concat({GgufString(key), LeU32(value_type), value});
}

Bytes RawGguf::Build() const {
  Bytes out = Concat({LeU32(magic), LeU32(version), LeU64(tensor_count.value_or(tensors.size())),
                      LeU64(kv_count.value_or(kvs.size()))});
  for (const Bytes& kv : kvs) out.insert(out.end(), kv.begin(), kv.end());
  for (const RawTensorInfo& t : tensors) {
    Bytes info = GgufString(t.name);
    Bytes dims = LeU32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
    info.insert(info.end(), dims.begin(), dims.end());
    for (uint64_t d : t.ne) {
      Bytes e = LeU64(d);
      info.insert(info.end(), e.begin(), e.end());
    }
    info = Concat({info, LeU32(t.type), LeU64(t.offset)});
    out.insert(out.end(), info.begin(), info.end());
  }
  while (out.size() % alignment != 0) out.push_back(0);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<BadGguf> MakeBadGgufFiles() {
  std::vector<BadGguf> files;
  auto add = [&](const std::string& name, const RawGguf& g, const std::string& expect) {
    files.push_back({name, g.Build(), expect});
  };
  RawGguf g;

  g = ValidBase();
  g.magic = 0x46554746;  // "FGUF"
  add("bad_magic.gguf", g, "bad magic");
  g = ValidBase();
  g.version = 1;
  add("version1.gguf", g, "version 1");
  g = ValidBase();
  g.version = 4;
  add("version_future.gguf", g, "version 4");
  g = ValidBase();
  g.kv_count = ~uint64_t{0};
  add("huge_kv_count.gguf", g, "metadata kv count 18446744073709551615 is impossible");
  g = ValidBase();
  g.tensor_count = ~uint64_t{0};
  add("huge_tensor_count.gguf", g, "tensor count 18446744073709551615 is impossible");

  g = ValidBase();
  g.kvs.push_back(Concat({LeU64(uint64_t{1} << 62), Bytes{'k', 'e', 'y'}}));
  add("huge_key_len.gguf", g, "key of metadata entry #1");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.name", kString, Concat({LeU64(~uint64_t{0} - 7), LeU8('x')})));
  add("huge_string_len.gguf", g, "'general.name' declares a string");
  g = ValidBase();
  g.kvs.push_back(KvRecord("tokenizer.ggml.tokens", kArray,
                           Concat({LeU32(kString), LeU64(uint64_t{1} << 60)})));
  add("huge_array_len.gguf", g, "'tokenizer.ggml.tokens' declares an array");
  g = ValidBase();
  g.kvs.push_back(KvRecord("nested", kArray, NestedArray(5)));
  add("deep_nesting.gguf", g, "'nested' nests arrays");
  // Declared as an array of strings but holding int32s: the "string lengths" read from the
  // integers point far past the end of the file.
  g = ValidBase();
  g.kvs.push_back(
      KvRecord("tokenizer.ggml.token_type", kArray,
               Concat({LeU32(kString), LeU64(4), LeU32(1), LeU32(2), LeU32(3), LeU32(4)})));
  add("int_array_as_string.gguf", g, "'tokenizer.ggml.token_type' declares a string");

  g = ValidBase();
  g.kvs.push_back(KvRecord("", kU32, LeU32(1)));
  add("empty_key.gguf", g, "empty key");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.architecture", kString, GgufString("dream")));
  add("dup_key.gguf", g, "duplicate metadata key 'general.architecture'");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.weird", 99, LeU32(1)));
  add("unknown_value_type.gguf", g, "'general.weird' has unknown value type 99");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.weird_array", kArray, Concat({LeU32(77), LeU64(1), LeU32(0)})));
  add("unknown_array_type.gguf", g, "'general.weird_array' has unknown array element type 77");
  g = ValidBase();
  g.kvs.push_back(KvRecord("llada.attention.causal", kBool, LeU8(7)));
  add("bad_bool.gguf", g, "'llada.attention.causal' has a BOOL value 7");

  g = ValidBase();
  g.kvs.push_back(KvRecord("general.alignment", kU32, LeU32(24)));
  add("bad_alignment.gguf", g, "'general.alignment' is 24");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.alignment", kU32, LeU32(0)));
  add("zero_alignment.gguf", g, "'general.alignment' is 0");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.alignment", kString, GgufString("32")));
  add("alignment_wrong_type.gguf", g, "'general.alignment' has type STRING");
  g = ValidBase();
  g.kvs.push_back(KvRecord("general.alignment", kI32, LeU32(32)));
  add("alignment_signed.gguf", g, "'general.alignment' has type INT32");

  g = ValidBase();
  g.tensors.push_back({"w", {8}, std::nullopt, kF32Type, 32});
  g.data.resize(64);
  add("dup_tensor.gguf", g, "duplicate tensor name 'w'");
  g = ValidBase();
  g.tensors[0].name = "";
  add("empty_tensor_name.gguf", g, "tensor #0 has an empty name");
  g = ValidBase();
  g.tensors[0].offset = 4096;
  add("offset_out_of_file.gguf", g, "'w' data (offset 4096");
  g = ValidBase();
  g.tensors[0].offset = ~uint64_t{0} - 31;  // aligned, wraps when added
  add("offset_overflow.gguf", g, "'w' data (offset 18446744073709551584");
  g = ValidBase();
  g.tensors[0].offset = 4;
  g.data.resize(64);
  add("misaligned_offset.gguf", g, "'w' has data offset 4, not a multiple");
  g = ValidBase();
  g.tensors.push_back({"v", {16}, std::nullopt, kF32Type, 32});
  g.tensors[0].ne = {16};  // w: [0, 64) overlaps v: [32, 96)
  g.data.resize(96);
  add("overlapping_tensors.gguf", g, "'w' and 'v' overlap");
  g = ValidBase();
  g.tensors[0].ne = {8, 0};
  add("zero_dim.gguf", g, "'w' has dimension 1 equal to 0");
  g = ValidBase();
  g.tensors[0].ne = {uint64_t{1} << 63};
  add("dim_overflow.gguf", g, "'w' has dimension 0 = 9223372036854775808");
  g = ValidBase();
  g.tensors[0].ne = {uint64_t{1} << 32, uint64_t{1} << 32};
  add("element_count_overflow.gguf", g,
      "'w' has shape [4294967296, 4294967296] whose element count overflows");
  g = ValidBase();
  g.tensors[0].ne = {uint64_t{1} << 31, uint64_t{1} << 31};  // 2^62 F32 = 2^64 B
  add("byte_size_overflow.gguf", g,
      "'w' has shape [2147483648, 2147483648] whose byte size overflows");
  g = ValidBase();
  g.tensors[0].ne = {2, 2, 2, 1, 1};
  add("too_many_dims.gguf", g, "'w' has 5 dimensions");
  g = ValidBase();
  g.tensors[0].ne = {};
  g.tensors[0].n_dims = 0;
  add("zero_dims.gguf", g, "'w' has 0 dimensions");
  g = ValidBase();
  g.tensors[0].type = 1000;
  add("bad_tensor_type.gguf", g, "'w' has unknown type 1000");
  g = ValidBase();
  g.tensors[0].type = kQ8_0Type;
  g.tensors[0].ne = {33};
  g.data.resize(64);
  add("block_size_mismatch.gguf", g, "'w' of type Q8_0 has ne[0] = 33");

  // Cut inside the first tensor info (header 24 B + kv 45 B + name 9 B + n_dims 4 B + ne 8 B =
  // 90, then the 4-byte type), and inside the tensor data.
  Bytes full = ValidBase().Build();
  files.push_back({"truncated.gguf", Bytes(full.begin(), full.begin() + 92), "type of tensor 'w'"});
  files.push_back({"truncated_data.gguf", Bytes(full.begin(), full.end() - 1),
                   "'w' data (offset 0, 32 bytes) extends past the end"});
  files.push_back({"tiny.gguf", Bytes{'G', 'G'}, "too small"});
  return files;
}

}  // namespace bicache::testing

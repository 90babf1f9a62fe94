// GPT-2 byte-level mapping: every byte 0..255 is given a printable Unicode code point so that
// BPE vocabularies can be stored as text. Bytes that are already printable Latin-1 ('!'..'~',
// U+00A1..U+00AC, U+00AE..U+00FF) map to themselves; the other 68 map to U+0100.. in byte order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bicache::tokenizer {

// Code point that stands for byte `b` in vocabulary text.
uint32_t ByteToCodepoint(uint8_t b);
// Inverse: the byte for a code point, or -1 if the code point stands for no byte.
int ByteFromCodepoint(uint32_t cp);
// UTF-8 text (as stored in the vocabulary) for a run of raw bytes.
std::string BytesToVocabText(std::string_view bytes);
// Raw bytes of vocabulary text. A code point outside the table is kept as its own UTF-8 bytes
// (lenient, so an odd vocabulary entry decodes to something instead of failing mid-stream).
// Returns false if `text` is not valid UTF-8.
bool VocabTextToBytes(std::string_view text, std::string* out);

// Appends the UTF-8 encoding of `cp` (assumed a valid scalar value).
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace bicache::tokenizer

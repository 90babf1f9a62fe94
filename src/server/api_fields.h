// Which body fields the generation endpoints take, one table for both (docs/serving.md, "OpenAI
// fields"). A field is either acted on (the parser reads it), harmless (accepted: it changes
// nothing about the answer, such as `user`), or not supported: then a value that would change
// the answer is a 400 naming the field, while its no-op value (`logprobs: false`, `tools: []`,
// `presence_penalty: 0`) is accepted, since clients send those by default. A field no table row
// names is a 400 too, as OpenAI answers it: a misspelt `temprature` must not pass unnoticed.
#pragma once

#include <nlohmann/json.hpp>

namespace bicache::server {

// Throws ApiException (400, param = the field) for the first field of `body` (an object; in key
// order) that is unknown, belongs to the other endpoint, or asks for something not supported.
// null counts as absent. Type and range checks of the fields acted on are the parser's.
void CheckFields(const nlohmann::json& body, bool chat);

}  // namespace bicache::server

// How the CLI words a library error: fields named by the library (util/field_error.h) are spelled
// as this front end's flags.
#pragma once

#include <string>
#include <string_view>

#include "util/error.h"

namespace bicache::cli {

// A field identifier as its flag: "gen_length" -> "--gen-length".
std::string FlagName(std::string_view field);

// The error's message with any fields spelled as flags; e.what() for an error without fields.
std::string RenderError(const Error& e);

}  // namespace bicache::cli

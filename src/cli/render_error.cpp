#include "cli/render_error.h"

#include "util/field_error.h"

namespace bicache::cli {

// Every field the library names has a flag of the same words, dashed (gen_length ->
// --gen-length, cfg -> --cfg, max_running -> --max-running), so no table is needed.
std::string FlagName(std::string_view field) {
  std::string flag = "--";
  for (char c : field) flag += c == '_' ? '-' : c;
  return flag;
}

std::string RenderError(const Error& e) {
  if (const auto* fe = dynamic_cast<const FieldError*>(&e)) return fe->Render(FlagName);
  return e.what();
}

}  // namespace bicache::cli

// `bicache tokenize -m FILE [--file F]`: token ids of each input line (special tokens parsed, no
// BOS added), comma-separated — for comparing with other tokenizers.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace bicache::cli {

Runner AddTokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of each input line");
  auto model = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  AddModelFlag(cmd, model.get());
  cmd->add_option("--file", *file, "read lines from this file (default: standard input)");
  return [=]() {
    const format::GgufFile gguf = format::GgufFile::Open(*model);
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::FromGguf(gguf);
    std::ifstream in;
    if (!file->empty()) {
      std::error_code ec;
      if (std::filesystem::is_directory(*file, ec))
        throw Error(ErrorKind::kIo, "--file '" + *file + "' is a directory");
      in.open(*file);
      if (!in) throw Error(ErrorKind::kIo, "cannot open --file '" + *file + "'");
    }
    std::istream& src = file->empty() ? std::cin : in;
    std::string line;
    while (std::getline(src, line)) {
      const std::vector<int32_t> ids = tok.Encode(line);
      std::string out;
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
      std::printf("%s\n", out.c_str());
    }
    if (src.bad())
      throw Error(ErrorKind::kIo, "cannot read " + (file->empty() ? std::string("standard input")
                                                                  : "--file '" + *file + "'"));
    return 0;
  };
}

static CommandRegistrar register_tokenize(AddTokenize, 30);

}  // namespace bicache::cli

// Whole-file fuzzing of the GGUF reader: any bytes, then everything a loader does with the result.
#include "fixtures.h"
#include "targets.h"
#include "util/error.h"

namespace bicache::fuzz {

void GgufBytes(Input in) {
  try {
    ExerciseParsedFile(format::GgufFile::FromBytes(in));
  } catch (const Error&) {
    // Rejected with a typed error: the documented outcome for a bad file.
  }
}

}  // namespace bicache::fuzz

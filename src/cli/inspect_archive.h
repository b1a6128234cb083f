// reap inspect of a saliency archive (inspect_archive.cpp): what it holds,
// of which model, and which plan methods it serves.
#pragma once

#include "gguf/gguf.h"

#include <string>

namespace reap::cli {

// Whether `m` is a saliency archive (general.type reap.saliency).
bool is_saliency_archive(const gguf::model & m);
// Prints the archive at `path` (read and checked as plan reads it), as text or
// one JSON object; the exit status (2 and the error when it does not read).
int inspect_archive(const std::string & path, bool json);

} // namespace reap::cli

// reference_forward_util.h: the llama.cpp side of a comparison with
// tools/reference_forward.py (the trainer's own PyTorch forward pass): the dump
// it reads, and its verdict. Header-only; used by test_llama_model and
// test_llama_mask.
#pragma once

#include "llama_test_util.h"

#include <fstream>
#include <string>
#include <vector>

namespace reap_test {

// Writes the dump format tools/reference_forward.py reads: n, n token ids, n*n_vocab logits.
inline void write_dump(const std::string & path, const std::vector<llama_token> & toks, const std::vector<float> & logits) {
    std::ofstream f(path, std::ios::binary);
    const int32_t n = (int32_t) toks.size();
    f.write((const char *) &n, 4);
    f.write((const char *) toks.data(), 4 * toks.size());
    f.write((const char *) logits.data(), sizeof(float) * logits.size());
}

// The largest |reference logit - dumped logit| reference_forward.py reports, or -1
// when it fails. `extra` is appended to its command line (e.g. --keep-channels FILE).
inline double reference_max_abs_diff(const std::string & model_path, const std::string & dump, std::string & out,
                                     const std::string & extra = "") {
    const std::string cmd = shell_quote(python()) + " " + shell_quote(source_dir() + "/tools/reference_forward.py") +
                            " logits -m " + shell_quote(model_path) + " --dump " + shell_quote(dump) + " --tol 1e9" +
                            (extra.empty() ? "" : " " + extra);
    if (run_cmd(cmd, out) != 0) {
        return -1;
    }
    const size_t at = out.find("\"max_abs_diff\": ");
    return at == std::string::npos ? -1 : std::stod(out.substr(at + 16));
}

}  // namespace reap_test

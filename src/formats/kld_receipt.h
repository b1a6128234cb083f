// The receipt reap eval writes beside a KLD base file it makes
// (FILE.reap-receipt.json): the file's size and sha256, and what wrote it (the
// base model by path, bytes, header, router and bytes' hashes; its mask; the
// text). The KLD base file keeps llama-perplexity's format, which names no
// model: without the receipt, rows read from it are of a model nobody recorded.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace reap {

constexpr const char * k_kld_receipt_format = "reap-kld-base-receipt";
constexpr int          k_kld_receipt_version = 1;

struct kld_base_receipt {
    uint64_t    bytes = 0;       // the KLD base file's
    std::string sha256;
    std::string base_path, base_sha256, base_router_sha256, base_files_sha256;
    uint64_t    base_bytes = 0;
    std::string base_mask, base_mask_sha256;   // "" when the base was not masked
    std::string input_path, input_sha256;
};

// FILE.reap-receipt.json for FILE.
std::string kld_receipt_path(const std::string & kld_base_path);

nlohmann::ordered_json kld_receipt_to_json(const kld_base_receipt & r);
// Every field checked (hashes are 64 hex digits, counts in range); false with
// the file and field named.
bool kld_receipt_from_json(const nlohmann::json & j, const std::string & name, kld_base_receipt & out, std::string & err);

// The receipt beside the rows file `kld_base_path` (or, given through a link,
// beside the file it names): `found` false when there is none (rows
// llama-perplexity wrote); else read, every field checked.
// Whether it describes the file's bytes is the caller's (fit checks the size,
// eval the hash while its passes read the rows).
bool read_kld_receipt_of(const std::string & kld_base_path, bool & found, kld_base_receipt & out, std::string & err);

} // namespace reap

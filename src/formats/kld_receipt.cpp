// The KLD base file's receipt (kld_receipt.h): written and read here only.
#include "formats/kld_receipt.h"

#include "util/json_fields.h"

#include <climits>
#include <cstdlib>
#include <sys/stat.h>

namespace reap {

std::string kld_receipt_path(const std::string & kld_base_path) { return kld_base_path + ".reap-receipt.json"; }

bool read_kld_receipt_of(const std::string & kld_base_path, bool & found, kld_base_receipt & out, std::string & err) {
    out = kld_base_receipt();
    // beside the name given, else beside the file it names (rows given through a link)
    std::string rpath = kld_receipt_path(kld_base_path);
    struct stat st;
    found = ::stat(rpath.c_str(), &st) == 0;
    if (!found) {
        if (char * real = ::realpath(kld_base_path.c_str(), nullptr)) {
            rpath = kld_receipt_path(real);
            free(real);
            found = ::stat(rpath.c_str(), &st) == 0;
        }
    }
    if (!found) return true;
    nlohmann::json j;
    return util::read_json_file(rpath, "KLD base receipt", 1 << 20, j, err) && kld_receipt_from_json(j, rpath, out, err);
}

nlohmann::ordered_json kld_receipt_to_json(const kld_base_receipt & r) {
    nlohmann::ordered_json j;
    j["format"] = k_kld_receipt_format;
    j["version"] = k_kld_receipt_version;
    j["kld_base"] = {{"bytes", r.bytes}, {"sha256", r.sha256}};
    j["base"] = {{"file", r.base_path},
                 {"bytes", r.base_bytes},
                 {"header_sha256", r.base_sha256},
                 {"router_sha256", r.base_router_sha256},
                 {"files_sha256", r.base_files_sha256}};
    j["base_mask"] = r.base_mask.empty() ? nlohmann::ordered_json(nullptr)
                                         : nlohmann::ordered_json{{"file", r.base_mask}, {"sha256", r.base_mask_sha256}};
    j["input"] = {{"file", r.input_path}, {"sha256", r.input_sha256}};
    return j;
}

bool kld_receipt_from_json(const nlohmann::json & j, const std::string & name, kld_base_receipt & out, std::string & err) {
    out = kld_base_receipt();
    util::json_fields f(j, "KLD base receipt '" + name + "'");
    int64_t version = 0;
    if (!f.header(k_kld_receipt_format, "a KLD base receipt", k_kld_receipt_version, version)) {
        err = f.error();
        return false;
    }
    util::json_fields k = f.child("kld_base"), b = f.child("base"), in = f.child("input");
    bool ok = f.ok() && k.u64("bytes", out.bytes) && k.sha256("sha256", out.sha256) && b.str("file", out.base_path) &&
              b.u64("bytes", out.base_bytes) && b.sha256("header_sha256", out.base_sha256) &&
              b.sha256("router_sha256", out.base_router_sha256) && b.sha256("files_sha256", out.base_files_sha256) &&
              in.str("file", out.input_path) && in.sha256("sha256", out.input_sha256);
    if (ok && f.has("base_mask")) {
        util::json_fields m = f.child("base_mask");
        ok = m.str("file", out.base_mask) && m.sha256("sha256", out.base_mask_sha256);
    }
    if (!ok) err = f.error();
    return ok;
}

} // namespace reap

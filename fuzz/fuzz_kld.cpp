// Fuzzes the KLD base record reader (llama-perplexity's --kl-divergence-base
// format): the header and token checks, then every record decompressed as
// eval's scoring loop reads them.
#include "fuzz_util.h"
#include "metrics/kld_record.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = reap_fuzz::write_scratch("base.kld", data, size);
    reap::kld_base_header hdr;
    std::string err;
    if (!reap::kld_base_read_header(path, hdr, err)) {
        return 0;
    }
    // The header was accepted, so the file holds exactly the records its
    // counts imply: every one of them must be inside the input.
    const size_t   rec_u16   = reap::kld_record_u16(hdr.n_vocab);
    const uint64_t n_scored  = (uint64_t) (hdr.n_ctx - 1 - hdr.n_ctx / 2) * (uint64_t) hdr.n_chunk;
    const uint64_t rec_bytes = rec_u16 * sizeof(uint16_t);
    if (hdr.data_offset + n_scored * rec_bytes != size) {
        fprintf(stderr, "kld header accepted but the records do not fill the file\n");
        abort();
    }
    std::vector<uint16_t> record(rec_u16);
    std::vector<float>    log_probs((size_t) hdr.n_vocab);
    for (uint64_t r = 0; r < n_scored; ++r) {
        memcpy(record.data(), data + hdr.data_offset + r * rec_bytes, rec_bytes);
        (void) reap::kld_decompress_row(record.data(), hdr.n_vocab, log_probs.data());
    }
    return 0;
}

// Cross-checks reap::gguf against the reference implementation in ggml
// (ggml/include/gguf.h, from ggml-base: this core test links ggml-base but not
// libllama, so it also runs in the sanitizer build) and llama.cpp's
// llama-gguf-split:
//   * every GGUF fixture the core tests write with reap's own writer (variants
//     of the test model, the shards of split sets, pruned zoo models single and
//     split, a saliency archive) and the vocab GGUFs shipped in llama.cpp's
//     models/ directory: reap's view (version, alignment, data offset, KV keys,
//     types and value bytes, tensor names, types, shapes, offsets, sizes)
//     equals ggml's;
//   * seeded byte flips: whenever reap accepts a damaged file, ggml accepts
//     it too and sees the same thing (reap is the stricter reader);
//   * split sets written by reap's writer are byte-identical to those of
//     llama-gguf-split (by tensor count and by size), llama-gguf-split's sets
//     read back as the same model with the same census, and its --merge
//     output reads as the original model.
#include "moe/census.h"
#include "gguf_test_util.h"
#include "prune_test_util.h"
#include "saliency_test_util.h"

#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace g = reap::gguf;
using namespace gguf_test;

namespace {

struct gguf_ctx_deleter {
    void operator()(gguf_context * c) const { gguf_free(c); }
};
using gguf_ptr = std::unique_ptr<gguf_context, gguf_ctx_deleter>;

gguf_ptr ggml_open(const std::string & path) {
    gguf_init_params params = {/*no_alloc =*/ true, /*ctx =*/ nullptr};
    return gguf_ptr(gguf_init_from_file(path.c_str(), params));
}

// Compares reap's header of `path` with ggml's context; reports every difference.
void expect_same_view(const std::string & path, const g::file_header & h, gguf_context * ctx) {
    SCOPED_TRACE(path);
    EXPECT_EQ(gguf_get_version(ctx), h.version);
    EXPECT_EQ(gguf_get_alignment(ctx), h.alignment);
    if (!h.tensors.empty()) EXPECT_EQ(gguf_get_data_offset(ctx), h.data_offset);
    ASSERT_EQ(gguf_get_n_kv(ctx), (int64_t) h.kvs.entries.size());
    for (int64_t i = 0; i < gguf_get_n_kv(ctx); ++i) {
        const g::kv & e = h.kvs.entries[(size_t) i];
        ASSERT_EQ(std::string(gguf_get_key(ctx, i)), e.key);
        ASSERT_EQ((uint32_t) gguf_get_kv_type(ctx, i), (uint32_t) e.type) << e.key;
        if (e.type == g::value_type::STRING) {
            EXPECT_EQ(std::string(gguf_get_val_str(ctx, i)), std::string(e.raw.begin() + 8, e.raw.end())) << e.key;
        } else if (e.type == g::value_type::ARRAY) {
            ASSERT_EQ((uint32_t) gguf_get_arr_type(ctx, i), (uint32_t) e.elem_type) << e.key;
            ASSERT_EQ(gguf_get_arr_n(ctx, i), e.n_elems) << e.key;
            if (e.elem_type == g::value_type::STRING) {
                std::vector<std::string> mine;
                std::string err;
                ASSERT_TRUE(h.kvs.get_string_array(e.key, mine, err)) << err;
                for (size_t j = 0; j < mine.size(); ++j) {
                    ASSERT_EQ(std::string(gguf_get_arr_str(ctx, i, j)), mine[j]) << e.key << "[" << j << "]";
                }
            } else {
                const size_t n = e.raw.size() - 12;
                if (n > 0) EXPECT_EQ(std::memcmp(gguf_get_arr_data(ctx, i), e.raw.data() + 12, n), 0) << e.key;
            }
        } else {
            EXPECT_EQ(std::memcmp(gguf_get_val_data(ctx, i), e.raw.data(), e.raw.size()), 0) << e.key;
        }
    }
    ASSERT_EQ(gguf_get_n_tensors(ctx), (int64_t) h.tensors.size());
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
        const g::tensor_info & t = h.tensors[(size_t) i];
        EXPECT_EQ(std::string(gguf_get_tensor_name(ctx, i)), t.name);
        EXPECT_EQ((uint32_t) gguf_get_tensor_type(ctx, i), (uint32_t) t.type) << t.name;
        const int64_t * ne = gguf_get_tensor_ne(ctx, i);
        for (int d = 0; d < 4; ++d) EXPECT_EQ(ne[d], t.ne[d]) << t.name << " ne[" << d << "]";
        EXPECT_EQ(gguf_get_tensor_offset(ctx, i), t.offset) << t.name;
        EXPECT_EQ(gguf_get_tensor_size(ctx, i), t.nbytes) << t.name;
    }
}

void crosscheck_file(const std::string & path) {
    g::file_header h;
    std::string err;
    ASSERT_TRUE(g::read_header(path, h, err)) << err;
    gguf_ptr ctx = ggml_open(path);
    ASSERT_TRUE(ctx) << "ggml rejects " << path;
    expect_same_view(path, h, ctx.get());
}

// Our type table against ggml's.
TEST(GgufCrosscheck, TypeTableEqualsGgml) {
    size_t known = 0;
    for (int id = 0; id < GGML_TYPE_COUNT; ++id) {
        const g::type_info * mine = g::find_type((uint32_t) id);
        const int64_t blck = ggml_blck_size((ggml_type) id);
        if (blck == 0) {   // removed from ggml
            EXPECT_EQ(mine, nullptr) << id;
            continue;
        }
        ASSERT_NE(mine, nullptr) << "ggml type " << id << " (" << ggml_type_name((ggml_type) id) << ") missing";
        EXPECT_STREQ(mine->name, ggml_type_name((ggml_type) id));
        EXPECT_EQ(mine->block_size, blck) << mine->name;
        EXPECT_EQ(mine->block_bytes, ggml_type_size((ggml_type) id)) << mine->name;
        ++known;
    }
    EXPECT_EQ(known, g::all_types().size());
}

TEST(GgufCrosscheck, GeneratedFilesReadTheSameAsGgml) {
    const std::string dir = scratch_dir("gguf_cross_generated");
    std::vector<model_options> variants(5);
    variants[1].alignment = 64;
    variants[2].version = 2;
    variants[3].alignment = 4096;
    variants[3].n_expert = 8;
    variants[4].alignment = 32;
    variants[4].seed = 99;
    for (size_t v = 0; v < variants.size(); ++v) {
        const std::string path = dir + "/m" + std::to_string(v) + ".gguf";
        write_model(path, variants[v]);
        crosscheck_file(path);
        // The shards of a split set, each as a file of its own.
        g::model m;
        std::string err;
        ASSERT_TRUE(g::open_model(path, m, err)) << err;
        g::write_options wo;
        wo.sync = false;
        wo.split_max_tensors = 7;
        std::vector<std::string> written;
        ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, dir + "/s" + std::to_string(v) + ".gguf", written, err)) << err;
        for (const std::string & shard : written) crosscheck_file(shard);
    }
}

// What the prune tests read back: every zoo model pruned to half its experts
// (single file and a split set), and a saliency archive as calibrate writes it.
TEST(GgufCrosscheck, PrunedModelsAndArchivesReadTheSameAsGgml) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("gguf-cross-zoo", err);
    ASSERT_FALSE(zoo.empty()) << err;
    const std::string dir = scratch_dir("gguf_cross_pruned");
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        g::model m;
        ASSERT_TRUE(g::open_model(zoo + "/" + name + ".gguf", m, err)) << err;
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 3, p, err)) << err;
        std::vector<std::string> written;
        ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/" + name + ".json", dir + "/" + name + "-half.gguf", written, err)) << err;
        ASSERT_EQ(written.size(), 1u);
        crosscheck_file(written[0]);
        ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/" + name + ".json", dir + "/" + name + "-split.gguf", written, err,
                                         true, 0, 5)) << err;
        ASSERT_GT(written.size(), 1u);
        for (const std::string & shard : written) crosscheck_file(shard);
    }
    const reap::saliency::archive a = saliency_test::make_archive({"en", "code"});
    const std::string arch_path = dir + "/saliency.gguf";
    ASSERT_TRUE(reap::saliency::write_archive(a, arch_path, err, true)) << err;
    crosscheck_file(arch_path);
}

TEST(GgufCrosscheck, LlamaVocabFilesReadTheSameAsGgml) {
    const std::string models = env_or("REAP_SOURCE_DIR", REAP_SOURCE_DIR) + "/third_party/llama.cpp/models";
    size_t checked = 0;
    for (const std::string & name : list_dir(models)) {
        if (name.size() < 5 || name.compare(name.size() - 5, 5, ".gguf") != 0) continue;
        const std::string path = models + "/" + name;
        gguf_ptr ctx = ggml_open(path);
        if (!ctx) continue;   // e.g. a Git LFS pointer instead of the file
        g::file_header h;
        std::string err;
        ASSERT_TRUE(g::read_header(path, h, err)) << err;
        expect_same_view(path, h, ctx.get());
        ++checked;
    }
    if (checked == 0) GTEST_SKIP() << "no readable GGUF in " << models;
}

// Whatever reap accepts, ggml accepts and reads the same way.
TEST(GgufCrosscheck, SeededByteFlipsAcceptedByReapAreAcceptedByGgml) {
    const std::string dir = scratch_dir("gguf_cross_flips");
    const std::string base_path = dir + "/base.gguf";
    write_model(base_path);
    const std::vector<uint8_t> base = read_all(base_path);
    g::file_header bh;
    std::string err;
    ASSERT_TRUE(g::parse_header(base.data(), base.size(), "base", bh, err)) << err;
    std::mt19937 rng(7);
    int accepted = 0, rejected = 0;
    for (int i = 0; i < 600; ++i) {
        std::vector<uint8_t> bytes = base;
        const int n_flips = 1 + (int) (rng() % 3);
        for (int f = 0; f < n_flips; ++f) bytes[rng() % bh.header_bytes] ^= (uint8_t) (1u << (rng() % 8));
        g::file_header h;
        if (!g::parse_header(bytes.data(), bytes.size(), "flip", h, err)) {
            ++rejected;
            continue;
        }
        // ggml wants densely packed data; reap allows aligned gaps. Compare only packed files.
        uint64_t expected = 0;
        bool packed = true;
        for (const g::tensor_info & t : h.tensors) {
            packed = packed && t.offset == expected;
            expected += (t.nbytes + h.alignment - 1) / h.alignment * h.alignment;
        }
        if (!packed) continue;
        const std::string path = dir + "/flip.gguf";
        write_all(path, bytes);
        gguf_ptr ctx = ggml_open(path);
        ASSERT_TRUE(ctx) << "flip #" << i << ": reap accepted a file that ggml rejects";
        expect_same_view(path, h, ctx.get());
        ++accepted;
    }
    EXPECT_GT(accepted, 10);
    EXPECT_GT(rejected, 10);
}

std::string gguf_split_bin() {
    const std::string bin = llama_bin_dir() + "/llama-gguf-split";
    return exists(bin) ? bin : std::string();
}

// llama-gguf-split exits without freeing its gguf contexts: in the sanitizer
// build LeakSanitizer would turn that into exit status 1, so leak checking is
// off for llama.cpp's tool (reap's own code is checked by the other tests).
int run(const std::string & cmd) {
    return std::system(("ASAN_OPTIONS=detect_leaks=0 " + cmd + " > /dev/null 2>&1").c_str());
}

TEST(GgufCrosscheck, SplitSetsEqualLlamaGgufSplit) {
    const std::string bin = gguf_split_bin();
    if (bin.empty()) GTEST_SKIP() << "llama-gguf-split not built (REAP_LLAMA_BIN_DIR)";
    const std::string dir = scratch_dir("gguf_cross_split");
    model_options o;
    o.large = true;
    const std::string single = dir + "/model.gguf";
    write_model(single, o);
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(single, m, err)) << err;
    reap::moe::census c_single;
    ASSERT_TRUE(reap::moe::take_census(m, {}, c_single, err)) << err;

    struct mode { const char * name; const char * flags; uint64_t max_bytes, max_tensors; };
    for (const mode & md : {mode{"tensors", "--split-max-tensors 5", 0, 5}, mode{"size", "--split-max-size 4M", 4000000, 0}}) {
        SCOPED_TRACE(md.name);
        const std::string theirs = dir + "/llama-" + md.name;
        ASSERT_EQ(run(bin + " --split " + md.flags + " " + single + " " + theirs), 0);
        g::write_options wo;
        wo.sync = false;
        wo.split_max_bytes = md.max_bytes;
        wo.split_max_tensors = md.max_tensors;
        std::vector<std::string> ours;
        ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, dir + "/reap-" + md.name + ".gguf", ours, err)) << err;
        ASSERT_GT(ours.size(), 1u);
        for (size_t s = 0; s < ours.size(); ++s) {
            const std::string their_shard = g::split_path(theirs, (uint32_t) s, (uint32_t) ours.size());
            ASSERT_TRUE(exists(their_shard)) << their_shard;
            EXPECT_TRUE(read_all(their_shard) == read_all(ours[s])) << ours[s] << " differs from " << their_shard;
        }
        EXPECT_FALSE(exists(g::split_path(theirs, (uint32_t) ours.size(), (uint32_t) ours.size() + 1)));

        // llama-gguf-split's set reads as the same model, with the same census.
        g::model split;
        ASSERT_TRUE(g::open_model(g::split_path(theirs, 0, (uint32_t) ours.size()), split, err)) << err;
        reap::moe::census c_split;
        ASSERT_TRUE(reap::moe::take_census(split, {}, c_split, err)) << err;
        EXPECT_EQ(c_split.n_shards, ours.size());
        c_split.n_shards = c_single.n_shards;
        c_split.file_bytes = c_single.file_bytes;
        EXPECT_EQ(reap::moe::census_json(c_split), reap::moe::census_json(c_single));

        // Merged back by llama-gguf-split: the same tensors and data, KVs plus split.* leftovers.
        const std::string merged = dir + "/merged-" + md.name + ".gguf";
        ASSERT_EQ(run(bin + " --merge " + ours[0] + " " + merged), 0);
        g::model mm;
        ASSERT_TRUE(g::open_model(merged, mm, err)) << err;
        ASSERT_EQ(mm.tensors.size(), m.tensors.size());
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            std::vector<uint8_t> a, b;
            ASSERT_TRUE(g::read_tensor(m, m.tensors[i].name, a, err)) << err;
            ASSERT_TRUE(g::read_tensor(mm, m.tensors[i].name, b, err)) << err;
            EXPECT_TRUE(a == b) << m.tensors[i].name;
        }
        crosscheck_file(merged);
    }
}

} // namespace

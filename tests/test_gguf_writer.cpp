// Tests of reap::gguf's writer, split sets and census (core only, no llama):
// split sets written by size and by tensor count read back as the same model
// with the same census; split-set validation errors; writer safety (never
// over an input, even through a hard link; never over an existing file
// without force; nothing left behind on failure, including a failure in the
// middle of writing); exact sizes from layout_output; data made when written
// (a producer: laid out uncalled, its wrong size or failure refused); expert
// slicing with file pieces; SHA-256 and SHA256SUMS.
#include "moe/census.h"
#include "gguf_test_util.h"
#include "util/file.h"
#include "util/path.h"
#include "util/sha256.h"

#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <sys/resource.h>

namespace g = reap::gguf;
using namespace gguf_test;

namespace {

g::write_options no_sync() {
    g::write_options o;
    o.sync = false;
    return o;
}

g::model open_or_die(const std::string & path) {
    g::model m;
    std::string err;
    EXPECT_TRUE(g::open_model(path, m, err)) << err;
    return m;
}

// The census with what legitimately differs between a split and an unsplit file cleared.
reap::moe::census census_without_files(const g::model & m) {
    reap::moe::census c;
    std::string err;
    EXPECT_TRUE(reap::moe::take_census(m, {}, c, err)) << err;
    c.file_bytes = 0;
    c.n_shards = 0;
    return c;
}

void expect_same_census(const reap::moe::census & a, const reap::moe::census & b) {
    EXPECT_EQ(reap::moe::census_json(a), reap::moe::census_json(b));
}

// Same logical model: KVs (split.* aside), tensor metadata and data.
void expect_same_model(const g::model & a, const g::model & b) {
    auto without_split = [](const g::kv_store & s) {
        std::vector<std::pair<std::string, std::vector<uint8_t>>> v;
        for (const g::kv & e : s.entries) {
            if (e.key.rfind("split.", 0) != 0) v.push_back({e.key, e.raw});
        }
        return v;
    };
    EXPECT_EQ(without_split(a.kvs), without_split(b.kvs));
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    std::string err;
    for (size_t i = 0; i < a.tensors.size(); ++i) {
        const g::tensor_info & x = a.tensors[i];
        const g::tensor_info & y = b.tensors[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.type, y.type);
        EXPECT_EQ(x.shape_string(), y.shape_string());
        std::vector<uint8_t> dx, dy;
        ASSERT_TRUE(g::read_tensor(a, x.name, dx, err)) << err;
        ASSERT_TRUE(g::read_tensor(b, y.name, dy, err)) << err;
        EXPECT_TRUE(dx == dy) << x.name;
    }
}

uint64_t file_size(const std::string & path) { return read_all(path).size(); }

} // namespace

TEST(GgufSplit, SplitByTensorsAndBytesReadsBackAsTheSameModel) {
    const std::string dir = scratch_dir("gguf_split");
    model_options o;
    o.large = true;
    const std::string single = dir + "/model.gguf";
    write_model(single, o);
    const g::model m = open_or_die(single);
    const reap::moe::census c_single = census_without_files(m);

    struct variant { const char * name; uint64_t max_bytes, max_tensors; };
    for (const variant & v : {variant{"by-tensors", 0, 5}, variant{"by-bytes", 4000000, 0},
                              variant{"both", 7000000, 7}, variant{"one-shard", 0, 1000}}) {
        SCOPED_TRACE(v.name);
        g::write_options wo = no_sync();
        wo.split_max_bytes = v.max_bytes;
        wo.split_max_tensors = v.max_tensors;
        const std::string target = dir + "/" + v.name + ".gguf";
        std::vector<g::shard_layout> layout;
        std::string err;
        ASSERT_TRUE(g::layout_output(g::spec_from_model(m), wo, target, layout, err)) << err;
        std::vector<std::string> written;
        ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, target, written, err)) << err;
        ASSERT_EQ(written.size(), layout.size());
        for (size_t s = 0; s < written.size(); ++s) {
            EXPECT_EQ(written[s], dir + "/" + v.name + g::split_path("", (uint32_t) s, (uint32_t) written.size()));
            EXPECT_EQ(file_size(written[s]), layout[s].file_bytes) << written[s];
            g::file_header h;
            ASSERT_TRUE(g::read_header(written[s], h, err)) << err;
            if (v.max_tensors) EXPECT_LE(h.tensors.size(), v.max_tensors);
            if (v.max_bytes && h.tensors.size() > 1) {
                uint64_t data = 0;
                for (const g::tensor_info & t : h.tensors) data += (t.nbytes + 31) / 32 * 32;
                EXPECT_LE(data, v.max_bytes);
            }
            // gguf-split's convention: split.no, split.tensors.count, split.count last, as u16, i32, u16.
            const size_t n = h.kvs.entries.size();
            ASSERT_GE(n, 3u);
            EXPECT_EQ(h.kvs.entries[n - 3].key, "split.no");
            EXPECT_EQ(h.kvs.entries[n - 3].type, g::value_type::U16);
            EXPECT_EQ(h.kvs.entries[n - 2].key, "split.tensors.count");
            EXPECT_EQ(h.kvs.entries[n - 2].type, g::value_type::I32);
            EXPECT_EQ(h.kvs.entries[n - 1].key, "split.count");
            EXPECT_EQ(h.kvs.entries[n - 1].type, g::value_type::U16);
            if (s > 0) EXPECT_EQ(n, 3u) << "all other KVs live in shard 1";
        }
        if (std::string(v.name) != "one-shard") EXPECT_GT(written.size(), 1u);
        const g::model split = open_or_die(written[0]);
        EXPECT_EQ(split.shards.size(), written.size());
        expect_same_model(m, split);
        expect_same_census(c_single, census_without_files(split));

        // Split -> single again gives the original file byte for byte.
        const std::string back = dir + "/" + v.name + "-joined.gguf";
        ASSERT_TRUE(g::write_output(g::spec_from_model(split), no_sync(), back, written, err)) << err;
        EXPECT_TRUE(read_all(back) == read_all(single));
    }
}

TEST(GgufSplit, BrokenSetsAreRejected) {
    const std::string dir = scratch_dir("gguf_split_broken");
    const std::string single = dir + "/model.gguf";
    write_model(single);
    const g::model m = open_or_die(single);
    g::write_options wo = no_sync();
    wo.split_max_tensors = 6;
    std::vector<std::string> shards;
    std::string err;
    ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, dir + "/set.gguf", shards, err)) << err;
    ASSERT_EQ(shards.size(), 4u);
    g::model out;

    // Opened from the second shard.
    EXPECT_FALSE(g::open_model(shards[1], out, err));
    EXPECT_NE(err.find("shard 2 of 4"), std::string::npos) << err;
    EXPECT_NE(err.find("open the first shard (" + shards[0] + ")"), std::string::npos) << err;

    const std::vector<uint8_t> shard3 = read_all(shards[2]);
    g::file_header h3;
    ASSERT_TRUE(g::parse_header(shard3.data(), shard3.size(), "s3", h3, err));
    auto rewrite_shard3 = [&](const std::function<void(raw_file &)> & change) {
        raw_file r = raw_from_header(h3, shard3);
        change(r);
        write_all(shards[2], r.serialize());
    };

    // A missing shard.
    ::rename(shards[2].c_str(), (shards[2] + ".away").c_str());
    EXPECT_FALSE(g::open_model(shards[0], out, err));
    EXPECT_NE(err.find("shard 3 of 4"), std::string::npos) << err;
    EXPECT_NE(err.find(shards[2]), std::string::npos) << err;
    ::rename((shards[2] + ".away").c_str(), shards[2].c_str());
    ASSERT_TRUE(g::open_model(shards[0], out, err)) << err;

    // A shard that disagrees on split.count.
    rewrite_shard3([](raw_file & r) { for (raw_kv & k : r.kvs) if (k.key == "split.count") k.value = {5, 0}; });
    EXPECT_FALSE(g::open_model(shards[0], out, err));
    EXPECT_NE(err.find("split.count = 5, but the first shard says 4"), std::string::npos) << err;

    // A shard in the wrong place.
    rewrite_shard3([](raw_file & r) { for (raw_kv & k : r.kvs) if (k.key == "split.no") k.value = {1, 0}; });
    EXPECT_FALSE(g::open_model(shards[0], out, err));
    EXPECT_NE(err.find("split.no = 1, expected 2"), std::string::npos) << err;

    // A tensor in two shards.
    const std::string first_name = m.tensors[0].name;
    rewrite_shard3([&](raw_file & r) { r.tensors[0].name = first_name; });
    EXPECT_FALSE(g::open_model(shards[0], out, err));
    EXPECT_NE(err.find("tensor '" + first_name + "' appears in shard 1 and again in shard 3"), std::string::npos) << err;

    // A tensor missing from the set (split.tensors.count disagrees with the shards).
    rewrite_shard3([&](raw_file & r) { r.tensors.pop_back(); });
    EXPECT_FALSE(g::open_model(shards[0], out, err));
    EXPECT_NE(err.find("split.tensors.count"), std::string::npos) << err;

    // split.count > 1 in a file that is not named like a shard.
    const std::string renamed = dir + "/renamed.gguf";
    ::rename(shards[0].c_str(), renamed.c_str());
    EXPECT_FALSE(g::open_model(renamed, out, err));
    EXPECT_NE(err.find("not named PREFIX-00001-of-00004.gguf"), std::string::npos) << err;
}

TEST(GgufSplit, SplitPathNaming) {
    EXPECT_EQ(g::split_path("out/model", 0, 3), "out/model-00001-of-00003.gguf");
    std::string prefix;
    uint32_t idx = 0, n = 0;
    EXPECT_TRUE(g::parse_split_path("a/b-c-00002-of-00010.gguf", prefix, idx, n));
    EXPECT_EQ(prefix, "a/b-c");
    EXPECT_EQ(idx, 1u);
    EXPECT_EQ(n, 10u);
    EXPECT_FALSE(g::parse_split_path("model.gguf", prefix, idx, n));
    EXPECT_FALSE(g::parse_split_path("m-00003-of-00002.gguf", prefix, idx, n));
    EXPECT_FALSE(g::parse_split_path("m-0001-of-00002.gguf", prefix, idx, n));
    EXPECT_FALSE(g::parse_split_path("m-00001-of-00002.bin", prefix, idx, n));
}

TEST(GgufWriter, RefusesToOverwriteInputsAndExistingFiles) {
    const std::string dir = scratch_dir("gguf_writer_safety");
    const std::string in = dir + "/in.gguf";
    write_model(in);
    const std::vector<uint8_t> original = read_all(in);
    const g::model m = open_or_die(in);
    std::vector<std::string> written;
    std::string err;

    // An existing target without force.
    const std::string other = dir + "/other.gguf";
    write_all(other, {'x'});
    EXPECT_FALSE(g::write_output(g::spec_from_model(m), no_sync(), other, written, err));
    EXPECT_NE(err.find(other + " exists"), std::string::npos) << err;
    EXPECT_EQ(read_all(other), std::vector<uint8_t>{'x'});
    g::write_options force = no_sync();
    force.force = true;
    EXPECT_TRUE(g::write_output(g::spec_from_model(m), force, other, written, err)) << err;
    EXPECT_TRUE(read_all(other) == original);

    // The input itself, by its path, a hard link and a symlink: refused even with force.
    const std::string hard = dir + "/hardlink.gguf";
    const std::string soft = dir + "/symlink.gguf";
    ASSERT_EQ(::link(in.c_str(), hard.c_str()), 0);
    ASSERT_EQ(::symlink("in.gguf", soft.c_str()), 0);
    for (const std::string & target : {in, hard, soft, dir + "/./in.gguf"}) {
        EXPECT_FALSE(g::write_output(g::spec_from_model(m), force, target, written, err)) << target;
        EXPECT_NE(err.find("refusing to write " + target + " over the input file"), std::string::npos) << err;
        EXPECT_TRUE(read_all(in) == original);
    }
    // A split output one of whose shard names is an input.
    const std::string shard_name = dir + "/set-00002-of-00004.gguf";
    ASSERT_EQ(::link(in.c_str(), shard_name.c_str()), 0);
    g::write_options split = force;
    split.split_max_tensors = 6;
    EXPECT_FALSE(g::write_output(g::spec_from_model(m), split, dir + "/set.gguf", written, err));
    EXPECT_NE(err.find("over the input file"), std::string::npos) << err;
    EXPECT_FALSE(exists(dir + "/set-00001-of-00004.gguf"));
    EXPECT_TRUE(read_all(in) == original);
}

TEST(GgufWriter, LeavesNothingBehindOnFailure) {
    const std::string dir = scratch_dir("gguf_writer_failure");
    const std::string in = dir + "/in.gguf";
    write_model(in);
    const g::model m = open_or_die(in);
    const std::vector<std::string> before = list_dir(dir);
    std::vector<std::string> written;
    std::string err;

    // A source piece outside its file.
    g::output_spec spec = g::spec_from_model(m);
    spec.tensors[3].pieces[0].offset = m.shards[0].file_size;
    EXPECT_FALSE(g::write_output(spec, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("tensor '" + spec.tensors[3].name + "': source piece"), std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before);

    // Data that do not match the shape.
    spec = g::spec_from_model(m);
    spec.tensors[2].pieces[0].length -= 1;
    EXPECT_FALSE(g::write_output(spec, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("output tensor '" + spec.tensors[2].name + "'"), std::string::npos) << err;
    EXPECT_NE(err.find("needs"), std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before);

    // Data made when written (output_tensor::produce): laid out from the shape
    // without being called; what it makes is written; a producer that fails
    // or makes another size than the shape leaves nothing, naming the tensor.
    spec = g::spec_from_model(m);
    const std::vector<uint8_t> want = read_all(in);
    const g::data_piece src = spec.tensors[2].pieces[0];
    int calls = 0;
    spec.tensors[2].pieces.clear();
    spec.tensors[2].produce = [&](std::vector<uint8_t> & out, std::string &) {
        ++calls;
        out.assign(want.begin() + (ptrdiff_t) src.offset, want.begin() + (ptrdiff_t) (src.offset + src.length));
        return true;
    };
    std::vector<g::shard_layout> laid;
    ASSERT_TRUE(g::layout_output(spec, no_sync(), dir + "/made.gguf", laid, err)) << err;
    EXPECT_EQ(calls, 0);
    ASSERT_TRUE(g::write_output(spec, no_sync(), dir + "/made.gguf", written, err)) << err;
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(read_all(dir + "/made.gguf"), want);   // the same bytes as the source's piece gives
    EXPECT_EQ(laid[0].file_bytes, file_size(dir + "/made.gguf"));
    ::unlink((dir + "/made.gguf").c_str());
    auto short_by_one = spec;
    short_by_one.tensors[2].produce = [&](std::vector<uint8_t> & out, std::string &) {
        out.assign(src.length - 1, 0);
        return true;
    };
    EXPECT_FALSE(g::write_output(short_by_one, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("tensor '" + spec.tensors[2].name + "': its producer made " + std::to_string(src.length - 1) + " bytes"),
              std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before);
    auto failing_producer = spec;
    failing_producer.tensors[2].produce = [](std::vector<uint8_t> &, std::string & e) {
        e = "cannot requantise";
        return false;
    };
    EXPECT_FALSE(g::write_output(failing_producer, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("tensor '" + spec.tensors[2].name + "': cannot requantise"), std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before);
    auto both = spec;
    both.tensors[2].pieces.push_back(src);
    EXPECT_FALSE(g::write_output(both, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("more than one of file pieces, an in-memory buffer and a producer"), std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before);

    // Invalid output metadata.
    spec = g::spec_from_model(m);
    spec.kvs.set_u32(g::k_key_alignment, 48);
    EXPECT_FALSE(g::write_output(spec, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("general.alignment = 48"), std::string::npos) << err;
    spec = g::spec_from_model(m);
    spec.tensors[1].name = spec.tensors[0].name;
    EXPECT_FALSE(g::write_output(spec, no_sync(), dir + "/out.gguf", written, err));
    EXPECT_NE(err.find("appears twice"), std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before);

    // A failure in the middle of writing a split set (file size limit hit in
    // shard 2 after shard 1 was complete): no shard, no temp file is left.
    model_options big;
    big.large = true;
    const std::string big_in = dir + "/big.gguf";
    write_model(big_in, big);
    const std::vector<std::string> before_big = list_dir(dir);
    const g::model bm = open_or_die(big_in);
    g::write_options split = no_sync();
    split.split_max_tensors = 2;   // shard 1: two small tensors; later shards hold the big ones
    std::vector<g::shard_layout> layout;
    ASSERT_TRUE(g::layout_output(g::spec_from_model(bm), split, dir + "/cut.gguf", layout, err)) << err;
    ASSERT_GE(layout.size(), 2u);
    struct rlimit old_limit;
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    struct rlimit limit = old_limit;
    limit.rlim_cur = layout[0].file_bytes + 4096;   // shard 1 fits, a later one does not
    size_t failing = 0;
    while (failing < layout.size() && layout[failing].file_bytes <= limit.rlim_cur) ++failing;
    ASSERT_LT(failing, layout.size());
    ASSERT_GT(failing, 0u);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
    const bool ok = g::write_output(g::spec_from_model(bm), split, dir + "/cut.gguf", written, err);
    setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_FALSE(ok);
    EXPECT_NE(err.find(layout[failing].path), std::string::npos) << err;
    EXPECT_EQ(list_dir(dir), before_big);

    // An unwritable directory (meaningless for root, who may write anyway).
    if (geteuid() != 0) {
        const std::string ro = dir + "/ro";
        ::mkdir(ro.c_str(), 0555);
        EXPECT_FALSE(g::write_output(g::spec_from_model(m), no_sync(), ro + "/out.gguf", written, err));
        EXPECT_NE(err.find("temp file"), std::string::npos) << err;
        EXPECT_TRUE(list_dir(ro).empty());
    }
}

// Expert slicing expressed with file pieces (as the slicer does) produces
// exactly the size the census predicted, and reads back with the kept slabs.
TEST(GgufCensus, MatchesTheModelAndPredictsPrunedSizes) {
    const std::string dir = scratch_dir("gguf_census");
    const std::string in = dir + "/in.gguf";
    write_model(in);
    const g::model m = open_or_die(in);
    reap::moe::census c;
    std::string err;
    ASSERT_TRUE(reap::moe::take_census(m, {4, 3}, c, err)) << err;
    EXPECT_EQ(c.arch, "qwen3moe");
    EXPECT_EQ(c.n_layer, 3u);
    EXPECT_EQ(c.moe_layers, (std::vector<uint32_t>{0, 2}));
    EXPECT_EQ(c.n_expert, 4u);
    EXPECT_EQ(c.n_expert_used, 2u);
    EXPECT_EQ(c.n_expert_groups, 0u);
    EXPECT_EQ(c.n_shexp_tensors, 2u);
    EXPECT_EQ(c.expert_ff_length, 32u);
    EXPECT_EQ(c.n_shards, 1u);
    EXPECT_EQ(c.file_bytes, file_size(in));
    uint64_t pool = 0, total = 0;
    for (const g::tensor_info & t : m.tensors) {
        total += t.nbytes;
        if (t.name.find("_exps") != std::string::npos) pool += t.nbytes;
    }
    EXPECT_EQ(c.expert_pool_bytes, pool);
    EXPECT_EQ(c.dense_bytes, total - pool);
    EXPECT_EQ(c.expert_bytes_per_layer, pool / 2 / 4);
    EXPECT_EQ(c.decode_bytes_per_token, total - pool + 2 * 2 * (pool / 2 / 4));
    EXPECT_EQ(c.types.at("mxfp4").count, 2u);
    EXPECT_EQ(c.types.at("q4_K").bytes, 2u * 4 * 32 * 144);
    ASSERT_EQ(c.keep_sizes.size(), 4u);   // 1, 2, 3 (= 25/50/75 %) and 4
    EXPECT_EQ(c.keep_sizes.back().n_keep, 4u);
    EXPECT_EQ(c.keep_sizes.back().file_bytes, c.file_bytes);
    const std::string json = reap::moe::census_json(c);
    for (const char * key : {"\"arch\"", "\"n_layer\"", "\"moe_layers\"", "\"n_expert\"", "\"n_expert_used\"",
                             "\"n_expert_groups\"", "\"expert_pool_bytes\"", "\"dense_bytes\"", "\"file_bytes\"",
                             "\"n_shards\"", "\"decode_bytes_per_token\"", "\"types\""}) {
        EXPECT_NE(json.find(key), std::string::npos) << key;
    }

    // Keep experts {3, 1} (in that order) by pieces, as a slicer would.
    const std::vector<int64_t> keep = {3, 1};
    g::output_spec spec = g::spec_from_model(m);
    spec.kvs.set_u32("qwen3moe.expert_count", (uint32_t) keep.size());
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        g::output_tensor & t = spec.tensors[i];
        const g::tensor_info & src = m.tensors[i];
        const bool exps = t.name.find("_exps") != std::string::npos;
        const bool router = t.name.find("ffn_gate_inp.weight") != std::string::npos;
        if (!exps && !router) continue;
        const int axis = exps ? 2 : 1;
        const uint64_t slab = src.nbytes / (uint64_t) src.ne[axis];
        t.ne[axis] = (int64_t) keep.size();
        t.pieces.clear();
        for (int64_t e : keep) t.pieces.push_back({m.path_of(src), src.file_offset + (uint64_t) e * slab, slab});
    }
    const std::string out = dir + "/pruned.gguf";
    std::vector<std::string> written;
    ASSERT_TRUE(g::write_output(spec, no_sync(), out, written, err)) << err;
    const g::model p = open_or_die(out);
    reap::moe::census pc;
    ASSERT_TRUE(reap::moe::take_census(p, {}, pc, err)) << err;
    EXPECT_EQ(pc.n_expert, 2u);
    EXPECT_EQ(c.keep_sizes[1].n_keep, 2u);
    EXPECT_EQ(c.keep_sizes[1].file_bytes, file_size(out));
    EXPECT_EQ(c.keep_sizes[1].expert_pool_bytes, pc.expert_pool_bytes);
    const g::tensor_info * src = m.find_tensor("blk.2.ffn_down_exps.weight");
    const g::tensor_info * dst = p.find_tensor("blk.2.ffn_down_exps.weight");
    ASSERT_TRUE(src && dst);
    const uint64_t slab = src->nbytes / 4;
    std::vector<uint8_t> a(slab), b(slab);
    ASSERT_TRUE(g::read_tensor_bytes(m, *src, 3 * slab, slab, a.data(), err)) << err;
    ASSERT_TRUE(g::read_tensor_bytes(p, *dst, 0, slab, b.data(), err)) << err;
    EXPECT_TRUE(a == b);

    // Keep counts outside the model are refused.
    EXPECT_FALSE(reap::moe::take_census(m, {5}, c, err));
    EXPECT_NE(err.find("--keep 5 is outside 1..4"), std::string::npos) << err;
}

TEST(GgufCensus, WrongTypedExpertCountIsAnError) {
    const std::string dir = scratch_dir("gguf_census_types");
    g::output_spec spec = make_model_spec();
    spec.kvs.set_string("qwen3moe.expert_count", "4");
    std::vector<std::string> written;
    std::string err;
    ASSERT_TRUE(g::write_output(spec, no_sync(), dir + "/m.gguf", written, err)) << err;
    const g::model m = open_or_die(dir + "/m.gguf");
    reap::moe::census c;
    EXPECT_FALSE(reap::moe::take_census(m, {}, c, err));
    EXPECT_EQ(err, "key 'qwen3moe.expert_count' has type string, expected i64");
}

TEST(Sha256, KnownVectorsAndSumsFile) {
    EXPECT_EQ(reap::util::sha256_bytes("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(reap::util::sha256_bytes("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const std::string dir = scratch_dir("sha256");
    write_model(dir + "/a.gguf");
    write_all(dir + "/b.txt", {'a', 'b', 'c'});
    std::string hex, err;
    ASSERT_TRUE(reap::util::sha256_file(dir + "/b.txt", hex, err)) << err;
    EXPECT_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::vector<uint8_t> a = read_all(dir + "/a.gguf");
    ASSERT_TRUE(reap::util::sha256_file(dir + "/a.gguf", hex, err)) << err;
    EXPECT_EQ(hex, reap::util::sha256_bytes(a.data(), a.size()));
    EXPECT_FALSE(reap::util::sha256_file(dir + "/missing", hex, err));

    ASSERT_TRUE(reap::util::update_sha256sums({dir + "/a.gguf", dir + "/b.txt"}, dir + "/SHA256SUMS", err)) << err;
    const std::vector<uint8_t> sums = read_all(dir + "/SHA256SUMS");
    const std::string text(sums.begin(), sums.end());
    EXPECT_EQ(text, hex + "  a.gguf\nba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  b.txt\n");
    if (std::system("command -v sha256sum > /dev/null 2>&1") == 0) {
        const std::string cmd = "cd '" + dir + "' && sha256sum -c --quiet SHA256SUMS";
        EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
}

// A file name holding a newline, a backslash or a carriage return is written
// as sha256sum writes it (a leading backslash, the name escaped), so that GNU
// `sha256sum -c` checks every line; reap reads the line back to the same name,
// and a second update replaces it rather than adding another.
TEST(Sha256, NamesWithNewlinesAndBackslashes) {
    const std::string dir = scratch_dir("sha256-escaped");
    const std::vector<std::string> names = {"a\nb.gguf", "back\\slash.gguf", "cr\r.gguf", "plain.gguf"};
    std::vector<std::string> paths;
    for (size_t i = 0; i < names.size(); ++i) {
        paths.push_back(dir + "/" + names[i]);
        write_all(paths.back(), {uint8_t('x'), uint8_t('0' + i)});
    }
    std::string err;
    ASSERT_TRUE(reap::util::update_sha256sums(paths, dir + "/SHA256SUMS", err)) << err;
    ASSERT_TRUE(reap::util::update_sha256sums(paths, dir + "/SHA256SUMS", err)) << err;
    std::vector<std::pair<std::string, std::string>> entries;
    ASSERT_TRUE(reap::util::read_sha256sums(dir + "/SHA256SUMS", entries, err)) << err;
    ASSERT_EQ(entries.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
        EXPECT_EQ(entries[i].first, names[i]);
        const std::vector<uint8_t> b = read_all(paths[i]);
        EXPECT_EQ(entries[i].second, reap::util::sha256_bytes(b.data(), b.size()));
    }
    const std::string cmd = "cd '" + dir + "' && sha256sum -c --strict --quiet SHA256SUMS";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "GNU sha256sum does not accept the file";
}

// The durable write every writer goes through: nothing under the target's name
// until commit; an existing target stays as it was until then; a write
// streamed through the descriptor counts; an abandoned or discarded file
// leaves nothing behind; a missing directory is an error naming the target.
TEST(DurableFile, AppearsOnlyWhenCommitted) {
    const std::string dir = scratch_dir("durable_file");
    const std::string target = dir + "/out.txt";
    std::string err;
    {
        reap::util::durable_file f;
        ASSERT_TRUE(f.open(target, err, /*sync=*/true)) << err;
        EXPECT_EQ(reap::util::dir_of(f.temp_path()), dir);
        ASSERT_TRUE(f.write(std::string("hello "), err)) << err;
        ASSERT_EQ(::write(f.fd(), "world", 5), 5);   // streamed straight into the descriptor
        EXPECT_FALSE(exists(target));
        ASSERT_TRUE(f.commit(err)) << err;
        EXPECT_TRUE(f.published());
    }
    const std::vector<uint8_t> got = read_all(target);
    EXPECT_EQ(std::string(got.begin(), got.end()), "hello world");
    struct stat st;
    ASSERT_EQ(::stat(target.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    EXPECT_EQ(list_dir(dir), std::vector<std::string>{"out.txt"});

    // Not committed (error path, scope exit) or discarded: the old content stays, no temp remains.
    {
        reap::util::durable_file f;
        ASSERT_TRUE(f.open(target, err)) << err;
        ASSERT_TRUE(f.write(std::string("replacement"), err)) << err;
        EXPECT_EQ(list_dir(dir).size(), 2u);
    }
    {
        reap::util::durable_file f;
        ASSERT_TRUE(f.open(target, err)) << err;
        ASSERT_TRUE(f.write(std::string("replacement"), err)) << err;
        ASSERT_TRUE(f.finish(err)) << err;
        f.discard();
        EXPECT_FALSE(f.publish(err));
    }
    const std::vector<uint8_t> kept = read_all(target);
    EXPECT_EQ(std::string(kept.begin(), kept.end()), "hello world");
    EXPECT_EQ(list_dir(dir), std::vector<std::string>{"out.txt"});

    // The one-shot form replaces the content.
    ASSERT_TRUE(reap::util::write_file_durably(target, "new\n", err)) << err;
    const std::vector<uint8_t> now = read_all(target);
    EXPECT_EQ(std::string(now.begin(), now.end()), "new\n");
    EXPECT_EQ(list_dir(dir), std::vector<std::string>{"out.txt"});

    reap::util::durable_file f;
    EXPECT_FALSE(f.open(dir + "/missing/out.txt", err));
    EXPECT_NE(err.find("beside " + dir + "/missing/out.txt"), std::string::npos) << err;
}

// Tests of the census behind `reap inspect` (moe/census.h), in-process and
// without the reap binary: its JSON against numbers the test computes from the
// files themselves with gguf_test_util.h's independent reader (tensor bytes by
// type, the *_exps pool, dense bytes, per-expert and per-token bytes, MoE
// blocks, file bytes = the sizes on disk), on a single file and on a split
// set, and its predicted size at a keep count against the file the prune
// library (prune/run.h) writes at that count. The command's human report,
// --help and errors: test_cli_inspect.cpp.
#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "moe/census.h"
#include "prune/run.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>

namespace g = reap::gguf;
using namespace gguf_test;

namespace {

// What `reap inspect` stamps its sizes with and prune then records: any
// 64-character plan hash gives the same layout; the version string is the same on both sides.
const char * k_version = "census-test";

// The census of `path` at the extra keep count `keep`, as `reap inspect --json`
// prints it (census_json), sized as a stamped prune writes.
nlohmann::json census_of(const std::string & path, uint32_t keep) {
    g::model m;
    std::string err;
    EXPECT_TRUE(g::open_model(path, m, err)) << err;
    const reap::moe::stamp_options stamp{true, std::string(64, '0'), k_version, ""};
    reap::moe::census c;
    EXPECT_TRUE(reap::moe::take_census(m, {keep}, c, err, stamp)) << path << ": " << err;
    return nlohmann::json::parse(reap::moe::census_json(c));
}

} // namespace

namespace {

// The census of the files `paths` (one model: a single file or every shard),
// computed here from the bytes with plain_read(), in inspect's JSON keys.
nlohmann::json census_from_files(const std::vector<std::string> & paths) {
    std::string why;
    std::vector<plain_gguf> files(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) {
        EXPECT_TRUE(plain_read(paths[i], files[i], why)) << paths[i] << ": " << why;
    }
    const plain_gguf & first = files[0];
    const std::string arch = plain_string(first, "general.architecture");
    const uint32_t n_expert = plain_u32(first, arch + ".expert_count");
    const uint32_t n_used = plain_u32(first, arch + ".expert_used_count");
    uint64_t tensor_bytes = 0, pool = 0, file_bytes = 0, n_tensors = 0;
    std::map<uint32_t, uint64_t> pool_by_block;   // block -> bytes of its *_exps tensors
    std::set<uint32_t> moe_blocks;
    nlohmann::json types = nlohmann::json::object();
    for (const plain_gguf & f : files) {
        file_bytes += f.file_bytes;
        for (const plain_tensor & t : f.tensors) {
            ++n_tensors;
            tensor_bytes += t.nbytes;
            nlohmann::json & ty = types[plain_type_of(t.type)->name];
            if (ty.is_null()) ty = {{"count", 0}, {"bytes", 0}};
            ty["count"] = ty["count"].get<uint64_t>() + 1;
            ty["bytes"] = ty["bytes"].get<uint64_t>() + t.nbytes;
            uint32_t block = 0;
            const bool in_block = std::sscanf(t.name.c_str(), "blk.%u.", &block) == 1;
            if (t.name.find("_exps") != std::string::npos) {
                pool += t.nbytes;
                if (in_block) pool_by_block[block] += t.nbytes;
            }
            if (in_block && (t.name.find("_exps") != std::string::npos || t.name.find("ffn_gate_inp") != std::string::npos)) {
                moe_blocks.insert(block);
            }
        }
    }
    uint64_t per_expert_max = 0, decode = tensor_bytes - pool;
    for (const auto & [block, bytes] : pool_by_block) {
        per_expert_max = std::max<uint64_t>(per_expert_max, bytes / n_expert);
        decode += bytes / n_expert * n_used;
    }
    nlohmann::json j;
    j["arch"] = arch;
    j["n_layer"] = plain_u32(first, arch + ".block_count");
    j["moe_layers"] = std::vector<uint32_t>(moe_blocks.begin(), moe_blocks.end());
    j["n_expert"] = n_expert;
    j["n_expert_used"] = n_used;
    j["n_tensors"] = n_tensors;
    j["tensor_bytes"] = tensor_bytes;
    j["expert_pool_bytes"] = pool;
    j["dense_bytes"] = tensor_bytes - pool;
    j["expert_bytes_per_layer"] = per_expert_max;
    j["decode_bytes_per_token"] = decode;
    j["file_bytes"] = file_bytes;
    j["n_shards"] = paths.size();
    j["types"] = types;
    return j;
}

// Every key of `want` has the same value in `got`.
void expect_agrees(const nlohmann::json & got, const nlohmann::json & want, const std::string & what) {
    for (const auto & [key, value] : want.items()) {
        ASSERT_TRUE(got.contains(key)) << what << ": the census JSON lacks " << key;
        EXPECT_EQ(got[key], value) << what << ": " << key;
    }
}

} // namespace

TEST(Inspect, JsonMatchesTheFileOnSingleAndSplitFiles) {
    const std::string dir = scratch_dir("inspect_json");
    const std::string single = dir + "/model.gguf";
    write_model(single);

    const nlohmann::json j = census_of(single, 3);
    const nlohmann::json want = census_from_files({single});
    expect_agrees(j, want, "single file");
    // the fixture's shape, so that the numbers above are not vacuous
    EXPECT_EQ(want["moe_layers"], nlohmann::json::array({0, 2}));
    EXPECT_EQ(want["types"]["mxfp4"]["count"], 2);
    EXPECT_GT(want["expert_pool_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT(want["dense_bytes"].get<uint64_t>(), 0u);
    struct stat st;
    ASSERT_EQ(::stat(single.c_str(), &st), 0);
    EXPECT_EQ(j["file_bytes"], (uint64_t) st.st_size);

    // The predicted size at --keep 3 is the size of the file prune writes at 3
    // (stamped, as by default), and its pool is what that file holds in *_exps
    // tensors. (A one-block model: prune wants every qwen3moe block to be MoE.)
    model_options one;
    one.n_layer = 1;
    const std::string one_path = dir + "/one.gguf";
    write_model(one_path, one);
    const nlohmann::json j1 = census_of(one_path, 3);
    expect_agrees(j1, census_from_files({one_path}), "one block");
    nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                           {"model", {{"arch", "qwen3moe"}, {"n_layer", 1}, {"n_expert", 4}, {"n_expert_used", 2}}},
                           {"n_keep", 3},
                           {"layers", {{{"layer", 0}, {"keep", {3, 0, 2}}}}}};
    const std::string plan_path = dir + "/keep3.json";
    std::ofstream(plan_path) << plan.dump();
    reap::prune::prune_request req;
    req.model = one_path;
    req.plan = plan_path;
    req.output = dir + "/keep3.gguf";
    req.sync = false;
    req.version = k_version;
    reap::prune::prune_job job;
    reap::prune::prune_written written;
    reap::util::error perr;
    ASSERT_TRUE(reap::prune::prepare_prune(req, job, perr) && reap::prune::write_prune(job, written, perr)) << perr.message;
    const nlohmann::json pruned = census_from_files({dir + "/keep3.gguf"});
    EXPECT_EQ(pruned["n_expert"], 3);
    bool found = false;
    for (const nlohmann::json & k : j1.at("keep_sizes")) {
        if (k.at("n_keep") != 3) continue;
        found = true;
        EXPECT_EQ(k.at("file_bytes"), pruned["file_bytes"]);
        EXPECT_EQ(k.at("expert_pool_bytes"), pruned["expert_pool_bytes"]);
    }
    EXPECT_TRUE(found) << "no keep_sizes entry for --keep 3: " << j1.dump();

    // The split set: the numbers of all shards together, file bytes on disk.
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(single, m, err)) << err;
    g::write_options wo;
    wo.sync = false;
    wo.split_max_tensors = 6;
    std::vector<std::string> shards;
    ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, dir + "/split.gguf", shards, err)) << err;
    ASSERT_GT(shards.size(), 1u);
    const nlohmann::json js = census_of(shards[0], 3);
    const nlohmann::json want_split = census_from_files(shards);
    expect_agrees(js, want_split, "split set");
    EXPECT_EQ(js["n_shards"], shards.size());
    EXPECT_GT(want_split["file_bytes"].get<uint64_t>(), want["file_bytes"].get<uint64_t>());   // a header per shard
    EXPECT_EQ(js["keep_sizes"], j["keep_sizes"]);   // the size of the pruned single file does not depend on the source's split
}

// prune_test_util.h: helpers shared by the prune / verify tests (core tests
// test_prune*.cpp and the llama.cpp ones test_llama_prune*.cpp): the zoo
// generated into the scratch directory, plans made in code (unsorted keep
// orders, group-aware), pruning through the library with SHA256SUMS, and
// running the reap binary. Header-only; needs only reap_core.
#pragma once

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "plan/plan.h"
#include "prune/prune.h"
#include "prune/width.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace prune_test {

// File helpers shared with the GGUF tests.
using gguf_test::exists;
using gguf_test::read_all;
using gguf_test::write_all;

using gguf_test::env_or;


inline std::string quote(const std::string & s) {
    std::string r = "'";
    for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

// Runs a shell command, capturing stdout+stderr; returns the exit status.
inline int run(const std::string & cmd, std::string & output) {
    output.clear();
    FILE * p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
    const int st = ::pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline std::string tmp_root() {
    const std::string root = env_or("REAP_TEST_TMP", "test-tmp");
    ::mkdir(root.c_str(), 0755);
    return root;
}

// A fresh, empty scratch directory $REAP_TEST_TMP/<name>.
inline std::string scratch(const std::string & name) {
    const std::string dir = tmp_root() + "/" + name;
    std::string out;
    run("rm -rf " + quote(dir), out);
    ::mkdir(dir.c_str(), 0755);
    return dir;
}



inline std::vector<std::string> zoo_names() {
    return {"qwen3moe", "qwen2moe", "deepseek2", "gpt-oss", "glm4moe", "llama4", "kimi-k3", "qwen3moe-q256"};
}

// The zoo, generated once per test binary into $REAP_TEST_TMP/<dirname> by
// tools/make_zoo.py (deterministic). Returns "" and sets err when it cannot run.
inline std::string zoo_dir(const std::string & dirname, std::string & err) {
    const std::string dir = tmp_root() + "/" + dirname;
    if (exists(dir + "/zoo.json")) return dir;
    // generated beside and renamed into place, so that tests running in
    // parallel never see a half-written zoo
    const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
    const std::string src = env_or("REAP_SOURCE_DIR", ".");
    const std::string py = env_or("REAP_PYTHON", exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
    const std::string cmd = quote(py) + " " + quote(src + "/tools/make_zoo.py") + " --out " + quote(tmp);
    std::string out;
    if (run(cmd, out) != 0 || !exists(tmp + "/zoo.json")) {
        err = "make_zoo.py failed: " + cmd + "\n" + out;
        run("rm -rf " + quote(tmp), out);
        return "";
    }
    if (::rename(tmp.c_str(), dir.c_str()) != 0) run("rm -rf " + quote(tmp), out);   // another test won
    if (!exists(dir + "/zoo.json")) {
        err = "no zoo at " + dir;
        return "";
    }
    return dir;
}

// A plan for `m` keeping n_keep experts per MoE layer, chosen at random
// (seeded) and in a shuffled, unsorted order. For group-limited routers the
// experts of each group stay together, groups in order, n_keep / n_group
// per group (shuffled within the group).
inline bool random_plan(const reap::gguf::model & m, int64_t n_keep, uint32_t seed, reap::plan & out, std::string & err) {
    reap::moe::layout lay;
    if (!reap::model_layout(m, lay, err)) return false;
    std::mt19937 rng(seed);
    reap::plan p;
    p.arch = lay.arch;
    p.n_layer = lay.n_layer;
    p.n_expert = lay.n_expert;
    p.n_expert_used = lay.n_expert_used;
    p.n_keep = n_keep;
    const int64_t G = lay.router.n_group > 1 ? lay.router.n_group : 1;
    for (int layer : lay.moe_layers) {
        reap::plan_layer pl;
        pl.layer = layer;
        const int64_t per_src = lay.n_expert / G, per_out = n_keep / G;
        for (int64_t g = 0; g < G; ++g) {
            std::vector<int64_t> ids;
            for (int64_t e = g * per_src; e < (g + 1) * per_src; ++e) ids.push_back(e);
            std::shuffle(ids.begin(), ids.end(), rng);
            ids.resize(size_t(per_out));
            if (std::is_sorted(ids.begin(), ids.end()) && ids.size() > 1) std::swap(ids[0], ids[1]);
            pl.keep.insert(pl.keep.end(), ids.begin(), ids.end());
        }
        p.layers.push_back(pl);
    }
    p.provenance = {{"method", "random"}, {"seed", seed}};
    out = std::move(p);
    return true;
}

// Makes expert plan `p` a width plan: each kept expert keeps K random
// channels of n_ff (seeded), ascending.
// `shared`: the model's shared expert is cut too (llama4, plan_model_facts::shared_cut):
// each layer also keeps K random shared channels.
inline void random_width(reap::plan & p, int64_t n_ff, int64_t K, uint32_t seed, bool shared = false) {
    std::mt19937 rng(seed);
    p.width_n_ff = n_ff;
    p.width_keep = K;
    auto pick = [&] {
        std::vector<int64_t> ids(static_cast<size_t>(n_ff));
        for (int64_t c = 0; c < n_ff; ++c) ids[size_t(c)] = c;
        std::shuffle(ids.begin(), ids.end(), rng);
        ids.resize(size_t(K));
        std::sort(ids.begin(), ids.end());
        return ids;
    };
    for (auto & l : p.layers) {
        l.channels.clear();
        for (size_t k = 0; k < l.keep.size(); ++k) l.channels.push_back(pick());
        l.shared_channels.clear();
        if (shared) l.shared_channels = pick();
    }
}

// About half of the experts, respecting group and n_expert_used constraints.
inline int64_t half_keep(const reap::gguf::model & m) {
    reap::moe::layout lay;
    std::string err;
    if (!reap::model_layout(m, lay, err)) return 0;
    const int64_t G = lay.router.n_group > 1 ? lay.router.n_group : 1;
    int64_t k = std::max<int64_t>(lay.n_expert / 2, lay.n_expert_used);
    k = (k + G - 1) / G * G;
    if (G > 1) k = std::max<int64_t>(k, 2 * G);
    return std::min<int64_t>(k, lay.n_expert);
}

// Writes `p` to plan_path, prunes `m` with it into `out_path` (library path:
// make_pruned_spec + write_output + SHA256SUMS). Returns the files written.
// `width` applies to width plans (prune/width.h: the down type).
inline bool prune_to(const reap::gguf::model & m, const reap::plan & p, const std::string & plan_path,
                     const std::string & out_path, std::vector<std::string> & written, std::string & err,
                     bool stamp = true, uint64_t split_max_bytes = 0, uint64_t split_max_tensors = 0,
                     const reap::prune::width_options & width = {}) {
    if (!reap::write_plan(p, plan_path, true, err)) return false;
    reap::prune::prune_options po;
    po.stamp = stamp;
    po.version = "test";
    if (!reap::plan_file_sha256(plan_path, po.plan_sha256, err)) return false;
    reap::moe::layout lay;
    if (!reap::model_layout(m, lay, err)) return false;
    reap::gguf::output_spec spec;
    if (!reap::prune::make_pruned_spec(m, lay, p, po, width, spec, err)) return false;
    reap::gguf::write_options wo;
    wo.force = true;
    wo.sync = false;
    wo.split_max_bytes = split_max_bytes;
    wo.split_max_tensors = split_max_tensors;
    if (!reap::gguf::write_output(spec, wo, out_path, written, err)) return false;
    return reap::prune::update_sha256sums(written, reap::prune::sums_path_for(written[0]), err);
}

inline bool verify(const reap::gguf::model & m, const reap::plan & p, const std::string & plan_path,
                   const std::string & out_path, std::string & err) {
    reap::prune::verify_options vo;
    if (!reap::plan_file_sha256(plan_path, vo.plan_sha256, err)) return false;
    reap::prune::verify_report rep;
    return reap::prune::verify_pruned(m, p, out_path, vo, rep, err);
}

} // namespace prune_test
